package fleet

import (
	"strings"
	"testing"
)

// The dispatch line names the plan's files and ends with the exact
// callback; an orch-notify path with shell characters is quoted, one on
// two lines and a bad plan name are refused.
func TestDispatchLine(t *testing.T) {
	tests := []struct {
		plan, notify string
		want         string // a part of the line
		err          string // a part of the error
	}{
		{"fix-auth", "", "Last step: run orch-notify done fix-auth \"<one-line status>\" (or orch-notify blocked fix-auth \"<reason>\").", ""},
		{"a", "/opt/orch/bin/orch-notify", "First run /opt/orch/bin/orch-notify started a.", ""},
		{"a", "/home/me/my tools/orch-notify", "First run '/home/me/my tools/orch-notify' started a.", ""},
		{"a", "/tmp/x\n/orch-notify", "", "spans lines"},
		{"../etc", "", "", "plan name"},
		{"a;rm", "", "", "plan name"},
	}
	for _, tt := range tests {
		line, err := DispatchLine(tt.plan, tt.notify)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("DispatchLine(%q, %q) = %q, %v; want an error with %q", tt.plan, tt.notify, line, err, tt.err)
			}
			continue
		}
		if err != nil || !strings.Contains(line, tt.want) || !strings.HasPrefix(line, "Read plans/"+tt.plan+"/PLAN.md and execute it exactly.") {
			t.Errorf("DispatchLine(%q, %q) = %q, %v; want it to hold %q", tt.plan, tt.notify, line, err, tt.want)
		}
	}
}
