package plans

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Verdict words a verifier may give a claim.
const (
	Confirmed    = "CONFIRMED"
	Refuted      = "REFUTED"
	Unverifiable = "UNVERIFIABLE"
)

// Verdict is a verifier's word on one claim, with its evidence.
type Verdict struct {
	Claim    int    `json:"claim"`
	Verdict  string `json:"verdict"`
	Evidence string `json:"evidence"`
}

var numbered = regexp.MustCompile(`^\s*(\d+)[.)]\s+(.*\S)\s*$`)

// section returns the lines under the markdown heading "## <name>" (any
// level from 2), up to the next heading of the same or a higher level.
func section(doc []byte, name string) ([]string, bool) {
	var out []string
	in, found := false, false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(make([]byte, 64<<10), MaxPlanSize)
	for sc.Scan() {
		line := sc.Text()
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") {
			h := strings.TrimSpace(strings.TrimLeft(t, "#"))
			if strings.EqualFold(h, name) {
				in, found = true, true
				continue
			}
			if in {
				break
			}
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	return out, found
}

// Claims returns the numbered list under "## Claims" in a RESULT.md, in
// order. Numbers must run 1, 2, 3...; a claim may not be empty.
func Claims(result []byte) ([]string, error) {
	lines, ok := section(result, "Claims")
	if !ok {
		return nil, fmt.Errorf("%w: no \"## Claims\" section", ErrNoClaims)
	}
	var claims []string
	for _, l := range lines {
		m := numbered.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if n != len(claims)+1 {
			return nil, fmt.Errorf("%w: claim numbered %d where %d was expected", ErrNoClaims, n, len(claims)+1)
		}
		claims = append(claims, m[2])
	}
	if len(claims) == 0 {
		return nil, fmt.Errorf("%w: the \"## Claims\" section lists nothing", ErrNoClaims)
	}
	return claims, nil
}

var verdictLine = regexp.MustCompile(`^\s*(\d+)[.)]\s+([A-Za-z-]+)\s*(?::|—|-)?\s*(.*?)\s*$`)

// Verdicts parses the "## Verdicts" section of a verifier's RESULT.md
// strictly: one line "N. WORD: evidence" for each of the n claims, in any
// order, WORD one of CONFIRMED, REFUTED, UNVERIFIABLE. Anything else is an
// error naming the line: an unreadable verdict is never a pass.
func Verdicts(result []byte, n int) ([]Verdict, error) {
	lines, ok := section(result, "Verdicts")
	if !ok {
		return nil, fmt.Errorf("%w: no \"## Verdicts\" section", ErrVerdicts)
	}
	got := make([]Verdict, n)
	seen := make([]bool, n)
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		m := verdictLine.FindStringSubmatch(l)
		if m == nil {
			return nil, fmt.Errorf("%w: line %q is not \"N. VERDICT: evidence\"", ErrVerdicts, l)
		}
		k, _ := strconv.Atoi(m[1])
		if k < 1 || k > n {
			return nil, fmt.Errorf("%w: verdict for claim %d, but there are %d claims", ErrVerdicts, k, n)
		}
		if seen[k-1] {
			return nil, fmt.Errorf("%w: two verdicts for claim %d", ErrVerdicts, k)
		}
		word := strings.ToUpper(m[2])
		if word != Confirmed && word != Refuted && word != Unverifiable {
			return nil, fmt.Errorf("%w: verdict for claim %d is %q: want CONFIRMED, REFUTED or UNVERIFIABLE", ErrVerdicts, k, m[2])
		}
		if strings.TrimSpace(m[3]) == "" {
			return nil, fmt.Errorf("%w: verdict for claim %d gives no evidence", ErrVerdicts, k)
		}
		seen[k-1] = true
		got[k-1] = Verdict{Claim: k, Verdict: word, Evidence: m[3]}
	}
	for i, s := range seen {
		if !s {
			return nil, fmt.Errorf("%w: no verdict for claim %d", ErrVerdicts, i+1)
		}
	}
	return got, nil
}
