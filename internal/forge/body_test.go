package forge

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func sampleBody() Body {
	cost := 0.0123
	return Body{
		Build: "0123456789abcdef", Refs: "Fixes #7", Source: "issue #7",
		Spec: "Add a --verbose flag.\n```go\nx := 1\n```\n",
		Orders: []Order{
			{ID: "WO-01", Title: "Add the flag | parse it", Status: "passed", Commit: "0123456789abcdef0123",
				Evidence: []Evidence{{Kind: "verify", Command: "go test ./...", ExitCode: 0}, {Kind: "acceptance", Command: "sh -c `x`", ExitCode: 0}}},
			{ID: "WO-02", Title: "Docs", Status: "failed", Stage: "acceptance_failed"},
		},
		Tokens: 1234, CostUSD: &cost, Failed: "WO-02 failed at acceptance_failed",
		Rerun:  "factory issue --repo . --issue 7",
		Ledger: Ledger{Handled: []int64{5, 3, 5}, Failure: "WO-02/acceptance_failed"},
	}
}

func TestRenderAndMerge(t *testing.T) {
	block := Render(sampleBody())
	for _, want := range []string{"Fixes #7", "| WO-01 | Add the flag \\| parse it | passed | 0123456789ab |",
		"| WO-02 | Docs | failed (acceptance_failed) |", "verify ` go test ./... `", "acceptance `` sh -c `x` ``",
		"1234 tokens, $0.0123", "````text\nAdd a --verbose flag.", "**Not finished:**"} {
		if !strings.Contains(block, want) {
			t.Errorf("block lacks %q:\n%s", want, block)
		}
	}
	tests := []struct {
		name, body, want string
	}{
		{"empty", "", block},
		{"user text only", "My notes.", block + "\n\nMy notes."},
		{"replaced in place", "Intro\n" + BeginMarker + "\nold\n" + EndMarker + "\nOutro", "Intro\n" + block + "\nOutro"},
		{"begin without end", "x " + BeginMarker + " y", block + "\n\nx " + BeginMarker + " y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Merge(tt.body, block)
			if got != tt.want {
				t.Fatalf("Merge =\n%q\nwant\n%q", got, tt.want)
			}
			if again := Merge(got, block); again != got {
				t.Errorf("Merge is not idempotent:\n%q\n%q", got, again)
			}
			st, ok := ReadLedger(got)
			if !ok || !slices.Equal(st.Handled, []int64{3, 5}) || st.Failure != "WO-02/acceptance_failed" {
				t.Errorf("ReadLedger = %+v, %v", st, ok)
			}
		})
	}
}

// TestRenderIsInert: nothing copied into the block can end it early.
func TestRenderIsInert(t *testing.T) {
	b := sampleBody()
	evil := EndMarker + " <!-- x --> " + BeginMarker
	b.Orders[0].Title, b.Source, b.Spec, b.Orders[0].Evidence[0].Command, b.Failed = evil, evil, evil, evil, evil
	body := Merge("user", Render(b))
	if n := strings.Count(body, EndMarker); n != 1 {
		t.Fatalf("%d end markers in\n%s", n, body)
	}
	if n := strings.Count(body, BeginMarker); n != 1 {
		t.Fatalf("%d begin markers in\n%s", n, body)
	}
	if st, ok := ReadLedger(body); !ok || st.Failure != b.Ledger.Failure {
		t.Fatalf("ReadLedger = %+v, %v", st, ok)
	}
}

func TestReadLedger(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		want   Ledger
		wantOK bool
	}{
		{"no block", "hello", Ledger{}, true},
		{"no state", BeginMarker + "x" + EndMarker, Ledger{}, false},
		{"bad json", BeginMarker + statePrefix + "{x -->" + EndMarker, Ledger{}, false},
		{"unknown field", BeginMarker + statePrefix + `{"handled":[1],"x":2} -->` + EndMarker, Ledger{}, false},
		{"trailing data", BeginMarker + statePrefix + `{"handled":[1]} {} -->` + EndMarker, Ledger{}, false},
		{"good", BeginMarker + statePrefix + `{"handled":[1,2]} -->` + EndMarker, Ledger{Handled: []int64{1, 2}}, true},
		{"state outside the block ignored", statePrefix + `{"handled":[9]} -->` + BeginMarker + statePrefix + `{"handled":[1]} -->` + EndMarker, Ledger{Handled: []int64{1}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ReadLedger(tt.body)
			if ok != tt.wantOK || !slices.Equal(got.Handled, tt.want.Handled) || got.Failure != tt.want.Failure {
				t.Errorf("ReadLedger = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// FuzzMergeBody: whatever the user's body and whatever text factory
// copies in, merging keeps the user's text outside the block, is
// idempotent, and reads back the state it wrote.
func FuzzMergeBody(f *testing.F) {
	f.Add("", "title", "go test", int64(1))
	f.Add("x "+BeginMarker+" y "+EndMarker+" z", EndMarker, "`a`", int64(-3))
	f.Add(EndMarker+BeginMarker, "<!--", "-->", int64(0))
	f.Fuzz(func(t *testing.T, user, title, command string, id int64) {
		orders := []Order{{ID: "WO-01", Title: title, Status: "passed", Commit: command,
			Evidence: []Evidence{{Kind: "verify", Command: command}}}}
		b := Body{Build: "b", Orders: orders, Spec: title, Source: command,
			Ledger: Ledger{Handled: []int64{id}, Failure: "WO-01/x"}.Shows(command, orders).Shows("b", orders)}
		block := Render(b)
		got := Merge(user, block)
		if again := Merge(got, block); again != got {
			t.Fatalf("not idempotent")
		}
		st, ok := ReadLedger(got)
		earlier := 1
		if command == "" || command == "b" {
			earlier = 0 // no build shown before, or this one
		}
		if !ok || !slices.Equal(st.Handled, []int64{id}) || st.Failure != "WO-01/x" || st.Build != "b" || len(st.Earlier) != earlier {
			t.Fatalf("ReadLedger = %+v, %v", st, ok)
		}
		if start, end, found := blockSpan(user); found {
			if !strings.HasPrefix(got, user[:start]) || !strings.HasSuffix(got, user[end:]) {
				t.Fatalf("the user's text around the block changed")
			}
		} else if strings.TrimSpace(user) != "" && !strings.HasSuffix(got, user) {
			t.Fatalf("the user's text was not kept")
		}
	})
}

// A block shows the builds it showed before: a rerun of the same build
// replaces its lines, another build moves them to the earlier ones, which
// stay bounded so that the ledger always reads back.
func TestLedgerShows(t *testing.T) {
	a := []Order{{ID: "WO-01", Title: "Skeleton", Status: "passed", Commit: "0123456789abcdef"}, {ID: "WO-02", Title: "Mul", Status: "failed", Stage: "acceptance_failed"}}
	l := Ledger{Handled: []int64{7}}.Shows("aaaa", a)
	if l.Build != "aaaa" || len(l.Earlier) != 0 || !slices.Equal(l.Handled, []int64{7}) ||
		!slices.Equal(l.Orders, []OrderLine{{ID: "WO-01", Title: "Skeleton", Status: "passed", Commit: "0123456789ab"}, {ID: "WO-02", Title: "Mul", Status: "failed (acceptance_failed)"}}) {
		t.Fatalf("first build: %+v", l)
	}
	a[1] = Order{ID: "WO-02", Title: "Mul", Status: "passed", Commit: "fedcba9876543210"}
	if l = l.Shows("aaaa", a); len(l.Earlier) != 0 || l.Orders[1].Status != "passed" {
		t.Fatalf("the same build again: %+v", l)
	}
	l = l.Shows("bbbb", []Order{{ID: "WO-01", Title: "Review fix", Status: "passed", Commit: "1111"}})
	if l.Build != "bbbb" || len(l.Earlier) != 1 || l.Earlier[0].Build != "aaaa" || l.Earlier[0].Orders[1].Commit != "fedcba987654" {
		t.Fatalf("a follow-up: %+v", l)
	}
	block := Render(Body{Build: "bbbb", Ledger: l})
	for _, want := range []string{"### Earlier builds on this branch", "build <code>aaaa</code>", "| WO-02 | Mul | passed | fedcba987654 |"} {
		if !strings.Contains(block, want) {
			t.Errorf("block lacks %q:\n%s", want, block)
		}
	}
	if got, ok := ReadLedger(block); !ok || len(got.Earlier) != 1 || got.Build != "bbbb" {
		t.Fatalf("ReadLedger = %+v, %v", got, ok)
	}

	// Many builds with long, hostile titles: the oldest go, the state stays
	// readable, and nothing in a title closes the block.
	long := strings.Repeat("é|-->", 400)
	for i := range 40 {
		var orders []Order
		for j := range 30 {
			orders = append(orders, Order{ID: fmt.Sprintf("WO-%02d", j+1), Title: long, Status: "passed", Commit: strings.Repeat("c", 40)})
		}
		l = l.Shows(fmt.Sprintf("build%02d<x>", i), orders)
	}
	if len(l.Earlier) == 0 || len(l.Earlier) > maxEarlier || l.Earlier[len(l.Earlier)-1].Build != "build38<x>" {
		t.Fatalf("%d earlier builds, the last %+v", len(l.Earlier), l.Earlier[len(l.Earlier)-1].Build)
	}
	if !utf8.ValidString(l.Earlier[0].Orders[0].Title) || len(l.Earlier[0].Orders[0].Title) > maxTitleBytes+len("…") {
		t.Errorf("title kept as %q", l.Earlier[0].Orders[0].Title)
	}
	block = Render(Body{Build: "last", Ledger: l})
	if strings.Count(block, EndMarker) != 1 || strings.Contains(block, "<x>") {
		t.Errorf("a title or build id escaped the block or the HTML")
	}
	if got, ok := ReadLedger(Merge("user text", block)); !ok || len(got.Earlier) != len(l.Earlier) {
		t.Fatalf("ReadLedger after many builds: %d earlier, %v", len(got.Earlier), ok)
	}
}
