package fleet

import (
	"fmt"
	"strings"

	"github.com/orch-dev/orch/plans"
)

// DispatchLine is the one line typed into a worker: it names the plan file
// and ends with the exact callback the worker must run, through notify:
// the absolute path of orch-notify when orch knows it (agents such as
// Codex run commands in a login shell, whose profile resets the PATH orch
// set), else "orch-notify". The name has been validated, so the line holds
// no character a shell or tmux would act on beyond what is written here.
func DispatchLine(name, notify string) (string, error) {
	if err := plans.ValidateName(name); err != nil {
		return "", err
	}
	if notify == "" {
		notify = "orch-notify"
	}
	if strings.ContainsAny(notify, "\n\r") {
		return "", fmt.Errorf("orch-notify's path %q spans lines: move orch-notify to a folder without a newline in its name", notify)
	}
	if strings.ContainsAny(notify, " \t\n\r'\"$`\\;&|<>(){}*?[]#~") {
		notify = ShellQuote(notify)
	}
	return fmt.Sprintf("Read %s and execute it exactly. First run %s started %s. Write %s. "+
		"Last step: run %s done %s \"<one-line status>\" (or %s blocked %s \"<reason>\").",
		plans.RelPlanPath(name), notify, name, plans.RelResultPath(name), notify, name, notify, name), nil
}
