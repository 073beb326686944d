package factory

import "testing"

func TestFailureKey(t *testing.T) {
	brief := func(stage, excerpt string) *FailureBrief {
		return &FailureBrief{Stage: stage, PrimaryErrorExcerpt: excerpt}
	}
	tests := []struct {
		name string
		a, b *FailureBrief
		same bool
	}{
		{"identical", brief(StageAcceptanceFailed, "FAILED: x"), brief(StageAcceptanceFailed, "FAILED: x"), true},
		{"durations", brief(StageAcceptanceFailed, "Ran 3 tests in 0.002s\nFAILED (failures=1)"),
			brief(StageAcceptanceFailed, "Ran 3 tests in 0.013s\nFAILED (failures=1)"), true},
		{"milliseconds", brief(StageVerifyFailed, "1 failed in 12ms"), brief(StageVerifyFailed, "1 failed in 340ms"), true},
		{"hex addresses", brief(StageAcceptanceFailed, "<Foo object at 0x7f3a2b1c>"), brief(StageAcceptanceFailed, "<Foo object at 0x7f99aa00>"), true},
		{"temp paths", brief(StageAcceptanceFailed, "open /tmp/tmpab12cd/x.txt: no such file"),
			brief(StageAcceptanceFailed, "open /tmp/tmpzz99qq/x.txt: no such file"), true},
		{"out dir", brief(StageAcceptanceFailed, "see /runs/r1/attempt_1/logs"), brief(StageAcceptanceFailed, "see /runs/r1/attempt_1/logs"), true},
		{"timestamps", brief(StageAcceptanceFailed, "2026-11-23 10:01:02,345 ERROR boom"),
			brief(StageAcceptanceFailed, "2026-11-23 10:01:07,001 ERROR boom"), true},
		{"different stage", brief(StageVerifyFailed, "FAILED: x"), brief(StageAcceptanceFailed, "FAILED: x"), false},
		{"different assertion", brief(StageAcceptanceFailed, "AssertionError: 3 != 4"), brief(StageAcceptanceFailed, "AssertionError: 3 != 5"), false},
		{"different test name", brief(StageAcceptanceFailed, "FAIL: test_add"), brief(StageAcceptanceFailed, "FAIL: test_sub"), false},
		{"line numbers matter", brief(StageAcceptanceFailed, `File "a.py", line 3`), brief(StageAcceptanceFailed, `File "a.py", line 4`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka, kb := failureKey(tt.a, "/runs"), failureKey(tt.b, "/runs")
			if (ka == kb) != tt.same {
				t.Errorf("same = %v, want %v\n a: %q\n b: %q", ka == kb, tt.same,
					normalizeExcerpt(tt.a.PrimaryErrorExcerpt, "/runs"), normalizeExcerpt(tt.b.PrimaryErrorExcerpt, "/runs"))
			}
		})
	}
}
