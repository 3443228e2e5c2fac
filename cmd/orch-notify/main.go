// Command orch-notify is what a worker runs as the last step of a plan: it
// tells the lead loop that the plan started, is done or is blocked, and
// exits 0 only once the event is kept (acknowledged by the broker, or
// spooled to disk when the broker is unreachable).
//
//	orch-notify started <plan>
//	orch-notify done    <plan> <status words...>
//	orch-notify blocked <plan> <reason words...>
//	orch-notify say [--plan <plan> | --topic <topic>] <text words...>
//	orch-notify hook claude          (Claude Code hooks: the hook JSON on stdin)
//	orch-notify hook codex <json>    (Codex's notify program)
//
// Exit codes: 0 kept, 1 not kept, 2 bad arguments. A hook always exits 0
// and prints nothing on stdout, so it can never block or break the agent.
package main

import (
	"os"

	"github.com/orch-dev/orch/notify"
)

func main() {
	os.Exit(notify.Main(os.Args[1:], os.Getenv, os.Stderr))
}
