package repomap

import (
	"path"
	"slices"
	"strings"
)

// index is what ranking needs of a Map that no task changes, in numbers
// rather than strings: every defined name once, sorted (so a name's id
// orders as the name does), each file's language family and directory,
// each definition's name, the files defining each name, and the names each
// file uses that another file it can see defines, with how often. Build
// makes it; a snapshot stores names and uses, and the rest is derived when
// it is loaded. It is read-only once made.
type index struct {
	names []string // every defined name, sorted by strings.Compare
	// flags of each name: what nameWeight and the Go visibility rule ask
	nameFlags []uint8

	fams    []string // the families of the files, by id
	famGo   int      // the id of "go", or -1
	fileFam []uint8  // family id of each file
	fileDir []int32  // directory of each file: equal ids, equal path.Dir

	defStart []int32 // file i's definitions are defName[defStart[i]:defStart[i+1]], in source order
	defName  []int32 // name id of each definition
	defSlot  []int32 // the first definition of the same name in the same file (an index into defName)

	refStart []int32 // file i's uses are refs[refStart[i]:refStart[i+1]], by name
	refs     []nameCount

	// The files of family f defining name k, ascending, are
	// defnFiles[defnStart[f*len(names)+k]:defnStart[f*len(names)+k+1]];
	// defnSlot holds the first such definition in each of them.
	defnStart []int32
	defnFiles []int32
	defnSlot  []int32
}

type nameCount struct{ name, count int32 }

const (
	nameSpecific = 1 << iota // long and specific: FetchUserRecord, parse_config
	namePrivate              // _helper
	nameExported             // an exported Go name
)

// newIndex indexes files and the identifiers each uses (refs[i] for
// files[i], sorted by name; nil for none).
func newIndex(files []File, refs [][]Ref) *index {
	ids := map[string]int32{}
	for _, f := range files {
		for _, d := range f.Defs {
			ids[d.Name] = 0
		}
	}
	names := make([]string, 0, len(ids))
	for name := range ids {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		ids[name] = int32(i)
	}
	defName := make([]int32, 0, len(ids))
	for _, f := range files {
		for _, d := range f.Defs {
			defName = append(defName, ids[d.Name])
		}
	}
	ix := &index{names: names, defName: defName}
	ix.derive(files)
	ix.refStart = make([]int32, len(files)+1)
	for i := range files {
		if i < len(refs) {
			for _, r := range refs[i] {
				if k, ok := ids[r.Name]; ok && ix.seesOther(i, k) {
					ix.refs = append(ix.refs, nameCount{k, int32(min(r.Count, 1<<31-1))})
				}
			}
		}
		ix.refStart[i+1] = int32(len(ix.refs))
	}
	return ix
}

// derive computes from files and ix.names and ix.defName everything but
// the uses.
func (ix *index) derive(files []File) {
	nn := len(ix.names)
	ix.nameFlags = make([]uint8, nn)
	for k, name := range ix.names {
		var fl uint8
		if len(name) >= 8 && (strings.Contains(name, "_") || strings.ToLower(name) != name && strings.ToUpper(name) != name) {
			fl |= nameSpecific
		}
		if strings.HasPrefix(name, "_") {
			fl |= namePrivate
		}
		if isExportedGo(name) {
			fl |= nameExported
		}
		ix.nameFlags[k] = fl
	}

	ix.famGo = -1
	famID := map[string]uint8{}
	dirID := map[string]int32{}
	ix.fileFam = make([]uint8, len(files))
	ix.fileDir = make([]int32, len(files))
	ix.defStart = make([]int32, len(files)+1)
	for i, f := range files {
		fam := family(f.Lang)
		id, ok := famID[fam]
		if !ok {
			id = uint8(len(ix.fams))
			famID[fam] = id
			if fam == "go" {
				ix.famGo = int(id)
			}
			ix.fams = append(ix.fams, fam)
		}
		ix.fileFam[i] = id
		dir := path.Dir(f.Path)
		d, ok := dirID[dir]
		if !ok {
			d = int32(len(dirID))
			dirID[dir] = d
		}
		ix.fileDir[i] = d
		ix.defStart[i+1] = ix.defStart[i] + int32(len(f.Defs))
	}

	// Definers: count the files per (family, name), then fill in file order.
	keys := len(ix.fams) * nn
	last := make([]int32, keys) // the last file counted for a key, plus one
	first := make([]int32, keys)
	ix.defnStart = make([]int32, keys+1)
	ix.defSlot = make([]int32, len(ix.defName))
	for i := range files {
		base := int32(ix.fileFam[i]) * int32(nn)
		for g := ix.defStart[i]; g < ix.defStart[i+1]; g++ {
			key := base + ix.defName[g]
			if last[key] != int32(i)+1 {
				last[key], first[key] = int32(i)+1, g
				ix.defnStart[key+1]++
			}
			ix.defSlot[g] = first[key]
		}
	}
	for key := range keys {
		ix.defnStart[key+1] += ix.defnStart[key]
	}
	ix.defnFiles = make([]int32, ix.defnStart[keys])
	ix.defnSlot = make([]int32, ix.defnStart[keys])
	fill := slices.Clone(ix.defnStart[:keys])
	for i := range files {
		base := int32(ix.fileFam[i]) * int32(nn)
		for g := ix.defStart[i]; g < ix.defStart[i+1]; g++ {
			if ix.defSlot[g] == g {
				key := base + ix.defName[g]
				ix.defnFiles[fill[key]], ix.defnSlot[fill[key]] = int32(i), g
				fill[key]++
			}
		}
	}
}

// definers returns where the files of file i's family that define name k
// are listed in defnFiles.
func (ix *index) definers(i int, k int32) (from, to int32) {
	key := int(ix.fileFam[i])*len(ix.names) + int(k)
	return ix.defnStart[key], ix.defnStart[key+1]
}

// local reports that a use of name k in file i can only mean a definition
// in the same directory: an unexported Go name.
func (ix *index) local(i int, k int32) bool {
	return int(ix.fileFam[i]) == ix.famGo && ix.nameFlags[k]&nameExported == 0
}

// seesOther reports that file i's use of name k can link to some other
// file: only such uses ever make an edge, whatever the focus.
func (ix *index) seesOther(i int, k int32) bool {
	from, to := ix.definers(i, k)
	local := ix.local(i, k)
	for _, j := range ix.defnFiles[from:to] {
		if int(j) != i && (!local || ix.fileDir[j] == ix.fileDir[i]) {
			return true
		}
	}
	return false
}

// nameID is the id of name, or -1 when no file defines it.
func (ix *index) nameID(name string) int32 {
	if k, ok := slices.BinarySearch(ix.names, name); ok {
		return int32(k)
	}
	return -1
}

// index returns m's index, making one (without uses) for a Map that was
// not built by Build.
func (m *Map) index() *index {
	if m.ix != nil {
		return m.ix
	}
	return newIndex(m.Files, nil)
}
