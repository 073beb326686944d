package edit

import "strings"

// finder searches one base for many patterns. strings.Index on a pattern
// that starts with a common byte (indentation, in code) falls back to
// Rabin-Karp at about 1 ns a byte; finder instead scans with IndexByte for
// the pattern's rarest byte, estimated from a sample of the base, and
// compares the whole pattern where that byte is found. When candidates come
// too densely for that to stay linear it finishes with Knuth-Morris-Pratt.
type finder struct {
	base    string
	freq    [256]uint32
	sampled bool
	// budget is the comparison work (candidates times their length, capped
	// at 1 KiB each) allowed before KMP takes over; 0 means
	// 4·len(base) + 64 KiB.
	budget int
}

// sampleStep spaces the bytes counted for the frequency estimate of a large
// base (a prime, so periodic text does not alias).
const sampleStep = 61

func (f *finder) sample() {
	f.sampled = true
	step := 1
	if len(f.base) > 1<<16 {
		step = sampleStep
	}
	for i := 0; i < len(f.base); i += step {
		f.freq[f.base[i]]++
	}
}

// find returns the offsets of the first limit occurrences of pat in the
// base, ascending (occurrences may overlap), and how many there are: every
// one when all is set, else at most limit.
func (f *finder) find(pat string, limit int, all bool) (offs []int, count int) {
	base := f.base
	n, m := len(base), len(pat)
	if m == 0 || m > n {
		return nil, 0
	}
	visit := func(p int) bool {
		if len(offs) < limit {
			offs = append(offs, p)
		}
		count++
		return all || count < limit
	}
	if !f.sampled {
		f.sample()
	}
	k := 0
	for i := 1; i < m; i++ {
		if f.freq[pat[i]] < f.freq[pat[k]] {
			k = i
		}
	}
	c := pat[k]
	// The anchor byte sits at q = p+k for a match at p; p+m <= n.
	last := n - m + k
	cost, spent, budget := min(m, 1024), 0, f.budget
	if budget == 0 {
		budget = 4*n + 1<<16
	}
	for q := k; q <= last; q++ {
		j := strings.IndexByte(base[q:last+1], c)
		if j < 0 {
			break
		}
		q += j
		p := q - k
		if base[p] == pat[0] && base[p+m-1] == pat[m-1] && base[p:p+m] == pat && !visit(p) {
			return offs, count
		}
		if spent += cost; spent > budget {
			kmp(base, pat, p+1, visit)
			return offs, count
		}
	}
	return offs, count
}

// kmp calls visit with every offset >= from at which pat occurs in s, in
// ascending order, until visit returns false. It takes O(len(s)+len(pat))
// whatever the input.
func kmp(s, pat string, from int, visit func(int) bool) {
	m := len(pat)
	fail := make([]int32, m) // fail[i]: length of the longest proper border of pat[:i+1]
	for i, b := 1, int32(0); i < m; i++ {
		for b > 0 && pat[i] != pat[b] {
			b = fail[b-1]
		}
		if pat[i] == pat[b] {
			b++
		}
		fail[i] = b
	}
	var q int32
	for i := from; i < len(s); i++ {
		for q > 0 && s[i] != pat[q] {
			q = fail[q-1]
		}
		if s[i] == pat[q] {
			q++
		}
		if int(q) == m {
			if !visit(i - m + 1) {
				return
			}
			q = fail[q-1]
		}
	}
}
