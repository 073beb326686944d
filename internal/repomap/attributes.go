package repomap

import (
	"cmp"
	"path"
	"slices"
	"strings"
)

// Attributes are the linguist attributes a tree's .gitattributes files
// give its paths: GitHub's way to say that checked-in code is vendored
// (linguist-vendored) or generated (linguist-generated) where its path or
// content does not say so. Only those two are read; a file's other lines
// are ignored.
type Attributes struct {
	files []attrFile // by depth, the root's first
}

type attrFile struct {
	dir   string // "" for the root
	rules []attrRule
}

type attrRule struct {
	pattern []string // the pattern's segments ("**" for any number)
	anyDir  bool     // a pattern without a slash: matched against the base name, at any depth
	// what the line does to each attribute
	vendored, generated attrState
}

type attrState uint8

const (
	attrUntouched   attrState = iota // the line does not name it
	attrSet                          // attr, attr=true (any value but false)
	attrUnset                        // -attr, attr=false
	attrUnspecified                  // !attr: back to unspecified
)

// ParseAttributes reads the .gitattributes files of a tree, by the
// directory holding each ("" for the root), as gitattributes(5) reads
// them: a line is a pattern and attributes (`attr` or `attr=true` sets,
// `-attr` or `attr=false` unsets, `!attr` makes unspecified again); a
// pattern without a slash matches a base name at any depth below its
// file, one with a slash the path from its file's directory; *, ? and
// [...] do not match a slash, ** matches any number of directories; a
// pattern ending in a slash matches directories, so no file; later lines
// override earlier ones and a deeper file a shallower one. Quoted patterns
// and macros ([attr]) are ignored, and so are $GIT_DIR/info/attributes
// and core.attributesFile, which are not part of the tree.
func ParseAttributes(files map[string][]byte) *Attributes {
	a := &Attributes{}
	for dir, data := range files {
		f := attrFile{dir: strings.Trim(dir, "/")}
		for line := range strings.Lines(string(data)) {
			if r, ok := parseAttrLine(line); ok {
				f.rules = append(f.rules, r)
			}
		}
		if len(f.rules) > 0 {
			a.files = append(a.files, f)
		}
	}
	depth := func(dir string) int {
		if dir == "" {
			return 0
		}
		return strings.Count(dir, "/") + 1
	}
	slices.SortFunc(a.files, func(x, y attrFile) int {
		return cmp.Or(cmp.Compare(depth(x.dir), depth(y.dir)), strings.Compare(x.dir, y.dir))
	})
	return a
}

func parseAttrLine(line string) (attrRule, bool) {
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return attrRule{}, false
	}
	p := fields[0]
	if strings.HasPrefix(p, "#") || strings.HasPrefix(p, "\"") || strings.HasPrefix(p, "[attr]") || strings.HasSuffix(p, "/") {
		return attrRule{}, false
	}
	var r attrRule
	for _, f := range fields[1:] {
		name, state := f, attrSet
		switch {
		case strings.HasPrefix(f, "-"):
			name, state = f[1:], attrUnset
		case strings.HasPrefix(f, "!"):
			name, state = f[1:], attrUnspecified
		case strings.Contains(f, "="):
			name = f[:strings.IndexByte(f, '=')]
			if strings.EqualFold(f[len(name)+1:], "false") {
				state = attrUnset
			}
		}
		switch name {
		case "linguist-vendored":
			r.vendored = state
		case "linguist-generated":
			r.generated = state
		}
	}
	if r.vendored == attrUntouched && r.generated == attrUntouched {
		return attrRule{}, false
	}
	r.anyDir = !strings.Contains(p, "/")
	r.pattern = strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, seg := range r.pattern {
		r.pattern[i] = strings.ReplaceAll(seg, "[!", "[^") // wildmatch's negation, in path.Match's spelling
	}
	return r, true
}

// linguist returns the state of linguist-vendored and linguist-generated
// for the file at p: attrSet, attrUnset, or attrUntouched where no line
// says (or the last one that says makes it unspecified).
func (a *Attributes) linguist(p string) (vendored, generated attrState) {
	if a == nil {
		return
	}
	for _, f := range a.files {
		rel := p
		if f.dir != "" {
			if !strings.HasPrefix(p, f.dir+"/") {
				continue
			}
			rel = p[len(f.dir)+1:]
		}
		for _, r := range f.rules {
			if !r.matches(rel) {
				continue
			}
			if r.vendored != attrUntouched {
				vendored = r.vendored
			}
			if r.generated != attrUntouched {
				generated = r.generated
			}
		}
	}
	if vendored == attrUnspecified {
		vendored = attrUntouched
	}
	if generated == attrUnspecified {
		generated = attrUntouched
	}
	return vendored, generated
}

func (r attrRule) matches(rel string) bool {
	if r.anyDir {
		ok, _ := path.Match(r.pattern[0], path.Base(rel))
		return ok
	}
	return matchSegments(r.pattern, strings.Split(rel, "/"))
}

// matchSegments matches a path's segments against a pattern's, "**"
// standing for any number of them.
func matchSegments(pattern, segs []string) bool {
	for len(pattern) > 0 {
		if pattern[0] == "**" {
			from := 0
			if len(pattern) == 1 {
				from = 1 // a trailing /** matches what is inside, not the directory itself
			}
			for k := from; k <= len(segs); k++ {
				if matchSegments(pattern[1:], segs[k:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pattern[0], segs[0]); !ok {
			return false
		}
		pattern, segs = pattern[1:], segs[1:]
	}
	return len(segs) == 0
}
