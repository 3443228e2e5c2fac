package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/orch-dev/orch/agent"
	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/fleet"
	"github.com/orch-dev/orch/gates"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/logfmt"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/lead"
	"github.com/orch-dev/orch/leadpane"
	"github.com/orch-dev/orch/tmux"
	"github.com/orch-dev/orch/web"
)

type serveOptions struct {
	Workers     string // a count, or agent:count groups
	Agent       string
	Port        int
	Leaf        string
	AckTimeout  time.Duration
	DupeWindow  time.Duration
	TrimEvery   int
	GateTimeout time.Duration
	Stagger     time.Duration
	Isolation   string
	Headless    bool
	Rebuild     bool
	Verbose     bool
	HTTP        string // the web board's listen address, empty for none
	NATS        string // an external cluster's leaf node URLs, comma-separated
	NATSDomain  string // its JetStream domain
	Creds       string // the credential file for the link to it
	LeadPane    string // the lead's tmux pane, typed into when idle
	LeadAgent   string // the agent in it, for its screens
	LeadPrompt  string // what its empty input line starts with
	leadReader  leadpane.Reader
	profile     *agent.Profile // what Agent resolved to
	groups      []fleet.Group  // what Workers resolved to
	workers     int            // how many workers in all
	upstream    *broker.Upstream
}

func newServeCmd(s streams) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the lead loop in the foreground (with --workers, bring the fleet up: tmux panes, or --headless processes)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			groups, err := resolveFleet(cmd.Context(), o.Workers, cmd.Flags().Changed("workers"), o.Agent)
			if err != nil {
				return err
			}
			o.groups = groups
			for _, g := range groups {
				o.workers += g.Count
			}
			if o.Isolation != "" && o.Isolation != "worktree" && o.Isolation != "shared" {
				return usagef("--isolation must be worktree or shared")
			}
			if o.Headless && o.workers == 0 {
				return usagef("--headless needs --workers N (how many plans may run at once)")
			}
			if o.HTTP != "" {
				if _, err := web.CheckAddr(o.HTTP); err != nil {
					return usageError{err}
				}
			}
			if o.NATS == "" && (o.Creds != "" || o.NATSDomain != "") {
				return usagef("--creds and --nats-domain go with --nats URL")
			}
			if o.NATS != "" {
				u, err := broker.ParseUpstream(o.NATS, o.NATSDomain, o.Creds)
				if err != nil {
					return usageError{err}
				}
				o.upstream = u
			}
			if len(groups) == 1 {
				o.profile = groups[0].Profile
			}
			if o.LeadPane == "" && (o.LeadAgent != "" || o.LeadPrompt != "") {
				return usagef("--lead-agent and --lead-prompt go with --lead-pane %%N")
			}
			if o.LeadPane != "" {
				if _, err := exec.LookPath("tmux"); err != nil {
					return fmt.Errorf("--lead-pane: tmux is not on PATH: install it (Debian/Ubuntu: sudo apt-get install -y tmux)")
				}
				r, err := leadpane.Prepare(cmd.Context(), tmux.New(tmuxSocket()), o.LeadPane, o.LeadAgent, o.LeadPrompt, os.Getenv("TMUX_PANE"))
				if err != nil {
					return usageError{err}
				}
				o.leadReader = r
			}
			if o.workers > 0 && !o.Headless {
				if _, err := exec.LookPath("tmux"); err != nil {
					how := "--workers " + o.Workers + " --agent " + fleet.ShellQuote(o.Agent)
					if o.Agent == "" {
						how = "--workers " + fleetSpec(groups)
					}
					return fmt.Errorf("tmux is not on PATH: install it (Debian/Ubuntu: sudo apt-get install -y tmux), or run the fleet without it: orch serve --headless %s", how)
				}
			}
			return serveRun(cmd.Context(), o, s)
		},
	}
	cmd.Flags().StringVar(&o.Workers, "workers", "0", "number of workers (tmux panes, or with --headless the plans run at once) with --agent; or agent:count groups, a mixed fleet (claude:3,codex:2: w1-w3 Claude Code, w4-w5 Codex); default: orch.yaml's workers:, else none")
	cmd.Flags().StringVar(&o.Agent, "agent", "", "agent profile (claude, codex, gemini, aider, or one from orch.yaml) or command each worker pane runs")
	cmd.Flags().IntVar(&o.Port, "port", 0, "broker port on 127.0.0.1 (default: the last one if free, else any)")
	cmd.Flags().DurationVar(&o.AckTimeout, "ack-timeout", lead.DefaultAckTimeout, "how long a worker has to run orch-notify started after a dispatch (the line is re-sent once, then the plan fails); negative disables")
	cmd.Flags().DurationVar(&o.DupeWindow, "dupe-window", 0, "how long the broker drops copies of an event id (default 10m); later copies are caught by the lead loop's record")
	cmd.Flags().IntVar(&o.TrimEvery, "trim-every", lead.DefaultTrimEvery, "remove what is handled from the event stream after this many events, when nothing waits")
	cmd.Flags().DurationVar(&o.GateTimeout, "gate-timeout", gates.DefaultGateTimeout, "how long each acceptance command may run before its process group is killed")
	cmd.Flags().DurationVar(&o.Stagger, "stagger", 0, "at most one dispatch per this interval, so results do not arrive in one burst (e.g. 2m)")
	cmd.Flags().BoolVar(&o.Rebuild, "rebuild", false, "make the lead loop's record (.orch/state.json) again from git: the ledger, harvest and integrate commits (an unreadable one is moved aside); a missing one is rebuilt without it")
	cmd.Flags().StringVar(&o.Isolation, "isolation", "", "worktree (each worker edits .orch/worktrees/wN, one branch orch/<plan> per plan) or shared (every worker edits the repo itself); default: orch.yaml's, else worktree")
	cmd.Flags().BoolVar(&o.Headless, "headless", false, "no tmux: run each plan as a child process of the agent's headless command (output in .orch/logs/)")
	cmd.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "log debug lines (including the NATS server's)")
	cmd.Flags().StringVar(&o.NATS, "nats", "", "keep the event stream on an external NATS cluster (replicated, R3): its leaf node URLs, nats://host:7422[,...]; workers still talk to the loopback broker, which links to the cluster as a leaf node")
	cmd.Flags().StringVar(&o.NATSDomain, "nats-domain", "", "the --nats cluster's JetStream domain (jetstream { domain } in its configuration)")
	cmd.Flags().StringVar(&o.Creds, "creds", "", "credential for the link to the --nats cluster: a JWT .creds file or an NKey user seed, mode 600")
	cmd.Flags().StringVar(&o.Leaf, "leaf", "", "let other hosts (orch hosts add) link here: an IP address of this machine they reach, with a port (e.g. 10.0.0.5:7422); only registered hosts' keys get in")
	cmd.Flags().StringVar(&o.LeadPane, "lead-pane", "", "type each callback into the lead agent's tmux pane (%N) when it waits at an empty prompt (for a lead without orch lead install: Codex, Gemini CLI, aider)")
	cmd.Flags().StringVar(&o.LeadAgent, "lead-agent", "", "the agent in --lead-pane whose screens orch reads (codex, claude, gemini); default: the program the pane runs")
	cmd.Flags().StringVar(&o.LeadPrompt, "lead-prompt", "", "what the --lead-pane agent's empty input line starts with (e.g. '>'), for an agent whose screens orch does not know")
	cmd.Flags().StringVar(&o.HTTP, "http", "", "serve the web board on this loopback address (127.0.0.1:0 picks a free port); its URL, with its token, is printed and written to .orch/board.url")
	return cmd
}

func serveRun(ctx context.Context, o *serveOptions, s streams) error {
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	level := slog.LevelInfo
	if o.Verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(logfmt.NewLineHandler(s.Err, level))
	cfg := lead.Config{
		Root:        root,
		Workers:     o.workers,
		Groups:      o.groups,
		Agent:       o.Agent,
		TmuxSocket:  tmuxSocket(),
		BinDir:      binDir(),
		Port:        o.Port,
		Upstream:    o.upstream,
		Leaf:        o.Leaf,
		AckTimeout:  o.AckTimeout,
		DupeWindow:  o.DupeWindow,
		TrimEvery:   o.TrimEvery,
		GateTimeout: o.GateTimeout,
		Stagger:     o.Stagger,
		Isolation:   o.Isolation,
		Rebuild:     o.Rebuild,
		Headless:    o.Headless,
		Profile:     o.profile,
		Fault:       os.Getenv(lead.FaultEnv),
		Logger:      logger,
	}
	if o.LeadPane != "" {
		cfg.Ready = func(string) {
			go func() {
				lp := leadpane.Config{Root: root, Pane: o.LeadPane, Tmux: tmux.New(tmuxSocket()), Reader: o.leadReader, Log: logger, Fault: cfg.Fault}
				if err := leadpane.Run(ctx, lp); err != nil {
					logger.Error("lead pane: callbacks are not typed into it (orch wait and orch inbox --agent pane still have them)", "err", err)
				}
			}()
		}
	}
	if o.HTTP != "" {
		// Listening first: a port in use fails orch serve before it starts
		// anything. The URL is told only once the loop runs (it holds the
		// repo's lock), so a second orch serve never overwrites the first's.
		srv, err := web.Listen(web.Config{Addr: o.HTTP, Root: root, Log: logger})
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer srv.Close()
		urlFile := filepath.Join(orchdir.Of(root), web.URLFile)
		written := false
		defer func() {
			if written {
				os.Remove(urlFile)
			}
		}()
		cfg.OnBoard = func(p *board.Publisher) {
			if err := srv.Follow(p); err != nil {
				logger.Warn("web board", "err", err)
				return
			}
			// The file first: whoever reads the printed line finds it there.
			if err := atomicfile.Write(urlFile, []byte(srv.URL()+"\n"), 0o600); err != nil {
				logger.Warn("web board: URL not written", "file", urlFile, "err", err)
			} else {
				written = true
			}
			fmt.Fprintf(s.Out, "board: %s\n", srv.URL())
		}
	}
	return lead.Run(ctx, cfg)
}
