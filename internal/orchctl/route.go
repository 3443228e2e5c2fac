package orchctl

import (
	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/config"
	"github.com/orch-dev/orch/plans"
)

// checkAgents checks that the agent profiles p names (agent:,
// verify_with:) are known: orch's own or orch.yaml's.
func checkAgents(root string, p *plans.Plan) error {
	if len(p.Agent) == 0 && (p.VerifyWith == "" || p.VerifyWith == plans.OtherAgent) {
		return nil
	}
	cfg, err := config.Load(root)
	if err != nil {
		return err
	}
	return p.CheckAgents(agent.Names(cfg))
}
