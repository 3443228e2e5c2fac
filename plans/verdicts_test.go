package plans

import (
	"errors"
	"testing"
)

func TestClaims(t *testing.T) {
	got, err := Claims([]byte("# Result\n\nok\n\n## Claims\n1. `go test ./...` passes\n2) the flag is gone\n\n## Notes\n3. not a claim\n"))
	if err != nil || len(got) != 2 || got[0] != "`go test ./...` passes" || got[1] != "the flag is gone" {
		t.Errorf("Claims = %q, %v", got, err)
	}
	for _, bad := range []string{"# Result\nno claims\n", "## Claims\n\n## Next\n", "## Claims\n1. a\n3. c\n"} {
		if _, err := Claims([]byte(bad)); !errors.Is(err, ErrNoClaims) {
			t.Errorf("Claims(%q) = %v, want ErrNoClaims", bad, err)
		}
	}
}

func TestVerdictsStrict(t *testing.T) {
	ok := "## Verdicts\n2. REFUTED: `test -f x` exit 1\n1. confirmed — ran it, exit 0\n"
	got, err := Verdicts([]byte(ok), 2)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Verdict != Confirmed || got[1].Verdict != Refuted || got[1].Evidence != "`test -f x` exit 1" || got[0].Evidence != "ran it, exit 0" {
		t.Errorf("Verdicts = %+v", got)
	}
	tests := []struct{ name, doc string }{
		{"unknown word", "## Verdicts\n1. MAYBE: looks fine\n2. CONFIRMED: yes\n"},
		{"missing claim", "## Verdicts\n1. CONFIRMED: yes\n"},
		{"duplicate", "## Verdicts\n1. CONFIRMED: yes\n1. REFUTED: no\n2. CONFIRMED: ok\n"},
		{"out of range", "## Verdicts\n1. CONFIRMED: yes\n2. CONFIRMED: yes\n3. CONFIRMED: yes\n"},
		{"prose", "## Verdicts\nAll good, everything confirmed.\n"},
		{"no section", "# Result\nCONFIRMED\n"},
		{"no evidence", "## Verdicts\n1. CONFIRMED\n2. CONFIRMED: ran it\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Verdicts([]byte(tc.doc), 2); !errors.Is(err, ErrVerdicts) {
				t.Errorf("Verdicts = %v, want ErrVerdicts", err)
			}
		})
	}
}
