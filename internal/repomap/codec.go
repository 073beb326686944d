package repomap

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"unsafe"
)

// The cache files (the parse cache and the snapshots) share one compact
// form, made to be read fast: a magic line, a table of every distinct
// string (all lengths, then all bytes), a body of unsigned varints, most
// of them indexes into the table, and a CRC-32C of all that. A reader
// takes the file as one string and slices the table out of it, so
// decoding allocates a few large arrays rather than a string per name.

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// encoder builds a cache file.
type encoder struct {
	body []byte
	ids  map[string]uint32
	strs []string
}

func newEncoder() *encoder { return &encoder{ids: map[string]uint32{}} }

func (e *encoder) uint(v uint64) { e.body = binary.AppendUvarint(e.body, v) }

// intern gives s its id in the table; str writes that id.
func (e *encoder) intern(s string) uint32 {
	id, ok := e.ids[s]
	if !ok {
		id = uint32(len(e.strs))
		e.ids[s] = id
		e.strs = append(e.strs, s)
	}
	return id
}

func (e *encoder) str(s string) { e.uint(uint64(e.intern(s))) }

// file is the whole file: magic, table, body, checksum.
func (e *encoder) file(magic string) []byte {
	size := len(magic) + 2*binary.MaxVarintLen64 + len(e.body) + 4
	for _, s := range e.strs {
		size += len(s) + 2
	}
	out := make([]byte, 0, size)
	out = append(out, magic...)
	out = binary.AppendUvarint(out, uint64(len(e.strs)))
	for _, s := range e.strs {
		out = binary.AppendUvarint(out, uint64(len(s)))
	}
	for _, s := range e.strs {
		out = append(out, s...)
	}
	out = binary.AppendUvarint(out, uint64(len(e.body)))
	out = append(out, e.body...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crcTable))
}

var errCorrupt = errors.New("corrupt")

// decoder reads a cache file. A malformed file sets bad; every read after
// that returns zero values, so a caller checks bad once, at the end.
type decoder struct {
	s    string // the body
	strs []string
	bad  bool
}

// newDecoder checks data's magic and checksum and reads its table.
func newDecoder(data []byte, magic string) (*decoder, error) {
	if len(data) < len(magic)+4 || string(data[:len(magic)]) != magic {
		return nil, errCorrupt
	}
	end := len(data) - 4
	if crc32.Checksum(data[:end], crcTable) != binary.LittleEndian.Uint32(data[end:]) {
		return nil, errCorrupt
	}
	// The decoder's strings point into data, which the caller hands over
	// and never changes: no copy of a file of megabytes.
	all := unsafe.String(&data[len(magic)], end-len(magic))
	d := &decoder{s: all}
	n := d.uint()
	if d.bad || n > uint64(len(all)) {
		return nil, errCorrupt
	}
	lens := make([]int, n)
	total := 0
	for i := range lens {
		l := d.uint()
		if l > uint64(len(d.s)) {
			return nil, errCorrupt
		}
		lens[i] = int(l)
		total += int(l)
	}
	if d.bad || total > len(d.s) {
		return nil, errCorrupt
	}
	blob := d.s[:total]
	d.s = d.s[total:]
	d.strs = make([]string, n)
	for i, l := range lens {
		d.strs[i], blob = blob[:l], blob[l:]
	}
	if size := d.uint(); d.bad || size != uint64(len(d.s)) {
		return nil, errCorrupt
	}
	return d, nil
}

func (d *decoder) uint() uint64 {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if len(d.s) == 0 {
			d.bad = true
			return 0
		}
		b := d.s[0]
		d.s = d.s[1:]
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v
		}
	}
	d.bad = true
	return 0
}

// int reads a number below limit.
func (d *decoder) int(limit int) int {
	v := d.uint()
	if v >= uint64(limit) {
		d.bad = true
		return 0
	}
	return int(v)
}

func (d *decoder) str() string {
	return d.strs[d.int(len(d.strs))]
}

// done reports a body read to its end without a fault.
func (d *decoder) done() bool { return !d.bad && len(d.s) == 0 }

// sortedStrings reports s sorted strictly ascending.
func sortedStrings(s []string) bool {
	for i := 1; i < len(s); i++ {
		if strings.Compare(s[i-1], s[i]) >= 0 {
			return false
		}
	}
	return true
}
