package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/leadagent"
	"github.com/orch-dev/orch/leadpane"
)

type leadOptions struct {
	Agent string
	Event string
	JSON  bool
}

func newLeadCmd(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lead",
		Short: "Make an agent session the lead: its hooks wake it with callbacks",
	}
	agentArg := func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("want the lead agent (claude), got %d argument(s)", len(args))
		}
		if args[0] != "claude" {
			return usagef("%q: %v", args[0], leadagent.ErrUnknownAgent)
		}
		return nil
	}
	inst := &leadOptions{}
	install := &cobra.Command{
		Use:   "install claude",
		Short: "Merge orch's lead hooks and allow rules into .claude/settings.local.json and write the playbook skill",
		Long: "Prepare the repo so that claude started in it is the lead: a SessionStart and a Stop hook\n" +
			"(asyncRewake) wake the idle session with the fleet's callbacks, UserPromptSubmit and PostToolUse\n" +
			"hooks add what arrived mid-turn to its next step, allow rules let it run orch, and the skill\n" +
			"" + leadagent.SkillPath + " is its playbook. The user's other settings are kept.\n" +
			"Start claude again in the repo after installing.",
		Args: agentArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			inst.Agent = args[0]
			return leadInstallRun(cmd.Context(), inst, s)
		},
	}
	install.Flags().BoolVar(&inst.JSON, "json", false, "print what was done as JSON")
	un := &leadOptions{}
	uninstall := &cobra.Command{
		Use:   "uninstall claude|pane",
		Short: "Take out exactly what orch lead install put in (the user's settings stay); pane: the inbox orch serve --lead-pane made",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && args[0] == leadpane.Agent {
				return nil
			}
			return agentArg(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			un.Agent = args[0]
			return leadUninstallRun(cmd.Context(), un, s)
		},
	}
	uninstall.Flags().BoolVar(&un.JSON, "json", false, "print what was done as JSON")
	hook := &cobra.Command{
		Use:    "hook claude <event>",
		Short:  "Claude Code's hook for the lead (installed by orch lead install; not for people)",
		Hidden: true,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("want the agent and the hook event")
			}
			if err := agentArg(c, args[:1]); err != nil {
				return err
			}
			for _, ev := range leadagent.ClaudeEvents {
				if args[1] == ev {
					return nil
				}
			}
			return usagef("%q is not a hook event orch installs (%v)", args[1], leadagent.ClaudeEvents)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return leadHookRun(&leadOptions{Agent: args[0], Event: args[1]}, s)
		},
	}
	cmd.AddCommand(install, uninstall, hook)
	return cmd
}

func leadInstallRun(ctx context.Context, o *leadOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("lead install: where is orch: %w", err)
	}
	res, err := orchctl.InstallLead(ctx, root, o.Agent, exe, time.Now())
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(s.Out, res)
	}
	fmt.Fprintf(s.Out, "lead hooks and allow rules merged into %s\n", res.Settings)
	fmt.Fprintf(s.Out, "playbook skill written to %s\n", res.Skill)
	fmt.Fprintf(s.Out, "inbox %s: callbacks since %s\n", res.Consumer, res.Since)
	if res.Excluded {
		fmt.Fprintf(s.Out, "%s added to .git/info/exclude (it was not ignored)\n", leadagent.SettingsPath)
	}
	fmt.Fprintln(s.Out, "start claude in the repo (again, if it runs): it is woken by the fleet's callbacks")
	return nil
}

func leadUninstallRun(ctx context.Context, o *leadOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	res, err := orchctl.UninstallLead(ctx, root, o.Agent)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(s.Out, res)
	}
	if res.Agent == leadpane.Agent {
		fmt.Fprintln(s.Out, "the lead pane's inbox removed")
	} else {
		fmt.Fprintf(s.Out, "%d orch entries removed from %s\n", res.Removed, res.Settings)
	}
	if res.SkillRemoved {
		fmt.Fprintf(s.Out, "removed %s\n", leadagent.SkillPath)
	}
	if !res.ConsumerDeleted {
		fmt.Fprintln(s.Out, "the inbox's consumer stays in the broker until orch serve runs and you uninstall again")
	}
	return nil
}

// leadHookRun runs the hook and exits with its code: Claude Code reads 2
// as "wake the model with stderr". SIGTERM, SIGINT and SIGHUP end a wait
// with nothing taken; a write already begun is finished.
func leadHookRun(o *leadOptions, s streams) error {
	// A write into a closed pipe must fail as an error, not kill orch by
	// SIGPIPE, so the callbacks are given back.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	root, err := hookRoot(ctx)
	if err != nil {
		return err
	}
	hs := orchctl.HookStreams{In: s.In, Out: s.Out, Err: s.Err}
	if f, ok := s.Err.(*os.File); ok {
		hs.ErrFile = f
	}
	if code := orchctl.LeadHook(ctx, root, o.Agent, o.Event, hs); code != 0 {
		return exitCode(code)
	}
	return nil
}

// hookRoot is the repo the lead was started in. Claude Code runs a hook
// in the session's current directory, which the lead may have moved into
// a worker's worktree (a repo of its own, with no inbox) with cd; it
// names the project's directory in CLAUDE_PROJECT_DIR.
func hookRoot(ctx context.Context) (string, error) {
	dir := os.Getenv("CLAUDE_PROJECT_DIR")
	if dir == "" {
		return repoRoot(ctx)
	}
	root, err := orchctl.FindRoot(ctx, dir)
	if err != nil {
		return "", fmt.Errorf("%w (CLAUDE_PROJECT_DIR=%s: start claude in the repo where orch lead install ran)", err, dir)
	}
	return root, nil
}
