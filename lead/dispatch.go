package lead

import (
	"fmt"

	"github.com/orch-dev/orch/plans"
)

// DispatchLine is the one line typed into a worker: it names the plan file
// and ends with the exact callback the worker must run. The name has been
// validated, so the line holds no character a shell or tmux would act on
// beyond what is written here.
func DispatchLine(name string) (string, error) {
	if err := plans.ValidateName(name); err != nil {
		return "", err
	}
	return fmt.Sprintf("Read %s and execute it exactly. First run orch-notify started %s. Write %s. "+
		"Last step: run orch-notify done %s \"<one-line status>\" (or orch-notify blocked %s \"<reason>\").",
		plans.RelPlanPath(name), name, plans.RelResultPath(name), name, name), nil
}
