package cli

import (
	"strings"
	"testing"
)

func TestNoteFilter(t *testing.T) {
	var out strings.Builder
	f := &noteFilter{w: &out}
	for _, chunk := range []string{"WO-01: title\n    attempt 1/2: se: asking\n    warn", "ing: unconfined\nbuild: recovering\n", "note: the new branch", " starts\npartial"} {
		f.Write([]byte(chunk))
	}
	if want := "warning: unconfined\nbuild: recovering\nnote: the new branch starts\n"; out.String() != want {
		t.Errorf("passed %q, want %q", out.String(), want)
	}
}

func TestLiveViewFit(t *testing.T) {
	v := &liveView{width: func() int { return 12 }}
	if got := v.fit("⠋ WO-01 1/3 a long title"); got != "⠋ WO-01 1/…" {
		t.Errorf("fit = %q", got)
	}
	if got := v.fit("short"); got != "short" {
		t.Errorf("fit = %q", got)
	}
}
