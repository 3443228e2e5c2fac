package orchctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/git"
	"github.com/orch-dev/orch/inbox"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/flock"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/leadagent"
	"github.com/orch-dev/orch/leadpane"
	"github.com/orch-dev/orch/notify"
)

// This file is orch lead: making an agent session the lead (install,
// uninstall) and the hooks that hand it its callbacks (Hook), plus orch
// inbox and orch ack. The inbox package keeps the lead agent's own
// position in the callbacks; leadagent knows Claude Code's files.

// LeadInstall is what orch lead install did.
type LeadInstall struct {
	Agent    string   `json:"agent"`
	Settings string   `json:"settings"`
	Skill    string   `json:"skill"`
	Consumer string   `json:"consumer"`
	Since    string   `json:"since"`
	Added    []string `json:"allow_added,omitempty"`
	// Excluded says .claude/settings.local.json was not ignored by git
	// and was added to .git/info/exclude.
	Excluded bool `json:"excluded,omitempty"`
}

// InstallLead makes a Claude Code session started in root the lead:
// orch's hooks and allow rules merged into .claude/settings.local.json,
// the playbook skill written, the inbox's record kept in .orch/lead/. A
// second install keeps the inbox's position and changes only the orch
// path. Nothing is written when the settings file cannot be merged.
func InstallLead(ctx context.Context, root, agent, orchBin string, now time.Time) (LeadInstall, error) {
	var res LeadInstall
	if agent != "claude" {
		return res, fmt.Errorf("lead install %s: %w", agent, leadagent.ErrUnknownAgent)
	}
	od := orchdir.Of(root)
	if fi, err := os.Stat(od); err != nil || !fi.IsDir() {
		return res, fmt.Errorf("lead install: %s is missing: run orch init first", od)
	}
	settingsPath := filepath.Join(root, leadagent.SettingsPath)
	doc, err := os.ReadFile(settingsPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, fmt.Errorf("lead install: %w", err)
	}
	out, added, err := leadagent.MergeClaude(doc, orchBin)
	if err != nil {
		return res, fmt.Errorf("lead install: %s: %w (fix or move the file, then install again)", settingsPath, err)
	}
	rec, err := inbox.LoadRecord(od, agent)
	if err != nil {
		if !errors.Is(err, inbox.ErrNotInstalled) {
			return res, fmt.Errorf("lead install: %w", err)
		}
		if rec, err = inbox.NewRecord(agent, now); err != nil {
			return res, err
		}
	}
	for _, a := range added {
		if !contains(rec.Added, a) {
			rec.Added = append(rec.Added, a)
		}
	}
	// The record first: a crash after it and before the settings leaves
	// an inbox that nothing reads, which a second install completes.
	if err := inbox.SaveRecord(od, rec); err != nil {
		return res, fmt.Errorf("lead install: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(settingsPath), 0o755); err != nil {
		return res, fmt.Errorf("lead install: %w", err)
	}
	if err := atomicfile.Write(settingsPath, out, modeOf(settingsPath, 0o644)); err != nil {
		return res, fmt.Errorf("lead install: %w", err)
	}
	skillPath := filepath.Join(root, leadagent.SkillPath)
	if err := os.MkdirAll(filepath.Dir(skillPath), 0o755); err != nil {
		return res, fmt.Errorf("lead install: %w", err)
	}
	if err := atomicfile.Write(skillPath, []byte(leadagent.Skill), 0o644); err != nil {
		return res, fmt.Errorf("lead install: %w", err)
	}
	excluded, err := excludeLocal(ctx, root, leadagent.SettingsPath)
	if err != nil {
		return res, fmt.Errorf("lead install: %w", err)
	}
	return LeadInstall{Agent: agent, Settings: settingsPath, Skill: skillPath, Consumer: rec.Consumer,
		Since: rec.Since.Format(time.RFC3339), Added: added, Excluded: excluded}, nil
}

// excludeLocal makes git ignore rel (relative to root) when it does not
// already, by a line in .git/info/exclude: the repo's .gitignore is the
// user's and is not touched.
func excludeLocal(ctx context.Context, root, rel string) (bool, error) {
	repo, err := git.Open(ctx, root)
	if err != nil {
		return false, err
	}
	ignored, err := repo.IsIgnored(ctx, rel)
	if err != nil || ignored {
		return false, err
	}
	gitDir := filepath.Join(root, ".git")
	if fi, err := os.Stat(gitDir); err != nil || !fi.IsDir() {
		return false, nil // a worktree or a submodule: left to the user
	}
	exclude := filepath.Join(gitDir, "info", "exclude")
	if err := os.MkdirAll(filepath.Dir(exclude), 0o755); err != nil {
		return false, err
	}
	return ensureLine(exclude, "/"+rel)
}

// LeadUninstall is what orch lead uninstall did.
type LeadUninstall struct {
	Agent    string `json:"agent"`
	Settings string `json:"settings"`
	// Removed counts the settings entries taken out (hooks and allow
	// rules).
	Removed      int  `json:"removed"`
	SkillRemoved bool `json:"skill_removed"`
	// ConsumerDeleted says the inbox's consumer was deleted (orch serve
	// was running); otherwise it stays in the broker, unread.
	ConsumerDeleted bool `json:"consumer_deleted"`
}

// UninstallLead takes out exactly what InstallLead put in: orch's hooks,
// the allow rules it added (by its record), the skill, the record. The
// user's other settings stay as they are.
func UninstallLead(ctx context.Context, root, agent string) (LeadUninstall, error) {
	res := LeadUninstall{Agent: agent}
	if agent == leadpane.Agent {
		return uninstallPane(ctx, root)
	}
	if agent != "claude" {
		return res, fmt.Errorf("lead uninstall %s: %w", agent, leadagent.ErrUnknownAgent)
	}
	od := orchdir.Of(root)
	rec, recErr := inbox.LoadRecord(od, agent)
	if recErr != nil && !errors.Is(recErr, inbox.ErrNotInstalled) {
		return res, fmt.Errorf("lead uninstall: %w", recErr)
	}
	settingsPath := filepath.Join(root, leadagent.SettingsPath)
	res.Settings = settingsPath
	doc, err := os.ReadFile(settingsPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return res, fmt.Errorf("lead uninstall: %w", err)
	default:
		out, n, err := leadagent.RemoveClaude(doc, rec.Added)
		if err != nil {
			return res, fmt.Errorf("lead uninstall: %s: %w (fix the file, then uninstall again)", settingsPath, err)
		}
		res.Removed = n
		if n > 0 {
			if string(bytes.TrimSpace(out)) == "{}" {
				err = os.Remove(settingsPath)
			} else {
				err = atomicfile.Write(settingsPath, out, modeOf(settingsPath, 0o644))
			}
			if err != nil {
				return res, fmt.Errorf("lead uninstall: %w", err)
			}
		}
	}
	skillPath := filepath.Join(root, leadagent.SkillPath)
	if err := os.Remove(skillPath); err == nil {
		res.SkillRemoved = true
		os.Remove(filepath.Dir(skillPath))               // only when empty
		os.Remove(filepath.Dir(filepath.Dir(skillPath))) // .claude/skills, only when empty
	} else if !errors.Is(err, fs.ErrNotExist) {
		return res, fmt.Errorf("lead uninstall: %w", err)
	}
	// Without a record (an uninstall while orch serve was down took it
	// out) the consumer still bears the name install gave it.
	consumer := "lead-" + agent
	if recErr == nil {
		consumer = rec.Consumer
	}
	res.ConsumerDeleted = deleteInbox(ctx, root, consumer)
	if err := inbox.RemoveRecord(od, agent); err != nil {
		return res, fmt.Errorf("lead uninstall: %w", err)
	}
	return res, nil
}

// deleteInbox deletes an inbox's consumer from orch serve's broker; false
// when orch serve is not running or the broker did not do it.
func deleteInbox(ctx context.Context, root, consumer string) bool {
	if !Serving(root) {
		return false
	}
	cfg, err := notify.LeadConfig(orchdir.Of(root))
	if err != nil {
		return false
	}
	nc, err := notify.Connect(cfg, "orch-lead-uninstall")
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false
	}
	err = js.DeleteConsumer(ctx, broker.StreamName, consumer)
	return err == nil || errors.Is(err, jetstream.ErrConsumerNotFound)
}

// uninstallPane takes out the inbox orch serve --lead-pane made (its
// consumer, which holds every callback in the stream while it is there,
// its record and its files), unless an orch serve types from it now.
func uninstallPane(ctx context.Context, root string) (LeadUninstall, error) {
	res := LeadUninstall{Agent: leadpane.Agent}
	od := orchdir.Of(root)
	lock, _, err := flock.TryExclusive(inbox.LockPath(od, leadpane.Agent))
	switch {
	case errors.Is(err, flock.ErrHeld):
		return res, fmt.Errorf("lead uninstall pane: %w: stop it (orch down), start orch serve without --lead-pane, then uninstall again", ErrPaneTyping)
	case err == nil:
		defer lock.Unlock()
	}
	consumer := "lead-" + leadpane.Agent
	if rec, err := inbox.LoadRecord(od, leadpane.Agent); err == nil {
		consumer = rec.Consumer
	}
	res.ConsumerDeleted = deleteInbox(ctx, root, consumer)
	for _, p := range leadpane.Files(od) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("lead uninstall pane: %w", err)
		}
	}
	if err := inbox.RemoveRecord(od, leadpane.Agent); err != nil {
		return res, fmt.Errorf("lead uninstall pane: %w", err)
	}
	return res, nil
}

// modeOf is the permission bits of the file at path, or def when there is
// none: a settings file the user keeps private (it may hold env secrets)
// stays private when orch rewrites it.
func modeOf(path string, def os.FileMode) os.FileMode {
	fi, err := os.Stat(path)
	if err != nil {
		return def
	}
	return fi.Mode().Perm()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// HookStreams are a hook's standard streams.
type HookStreams struct {
	In       io.Reader
	Out, Err io.Writer
	// ErrFile is Err as a file when it is one, for noticing that its
	// reader went away (a lead killed while its hook waits).
	ErrFile *os.File
}

// Hook exit codes, as Claude Code reads them.
const (
	HookOK    = 0
	HookWake  = 2 // an asyncRewake hook: wake the model with stderr
	HookError = 1
)

// hookSettle is how long a waiting hook goes on gathering after the
// first callback, so that callbacks arriving together wake the lead once.
const hookSettle = 150 * time.Millisecond

// LeadHook runs orch's hook for a Claude Code lead's event and returns
// its exit code. SessionStart and Stop wait (in the background, for
// Claude Code) until callbacks are waiting and exit HookWake with them on
// stderr; UserPromptSubmit and PostToolUse take what is waiting now and
// print it as context for the next step. Either way a callback is marked
// handed over only after it was written out; a hook that dies before
// leaves it for the next. ctx ending (SIGTERM: a newer hook took over, or
// Claude Code ended it) makes a waiting hook exit HookOK with nothing.
func LeadHook(ctx context.Context, root, agent, event string, s HookStreams) int {
	io.Copy(io.Discard, io.LimitReader(s.In, 1<<20)) // the hook's JSON: nothing in it is needed
	od := orchdir.Of(root)
	rec, err := inbox.LoadRecord(od, agent)
	if err != nil {
		fmt.Fprintf(s.Err, "orch lead hook: %v\n", err)
		return HookError
	}
	lock, err := takeOver(ctx, inbox.LockPath(od, agent))
	if err != nil {
		fmt.Fprintf(s.Err, "orch lead hook: %v\n", err)
		return HookError
	}
	defer lock.Unlock()
	if leadagent.Armed(event) {
		return waitAndWake(ctx, root, rec, s)
	}
	return takeNow(ctx, root, rec, event, s)
}

// takeOver takes the takers' lock of an inbox. A hook holding it (a
// waiting one) is asked to leave with SIGTERM; it leaves at once unless
// it is writing a batch out, which it finishes first.
func takeOver(ctx context.Context, path string) (*flock.Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	l, pid, err := flock.TryExclusive(path)
	if err == nil {
		return l, nil
	}
	if !errors.Is(err, flock.ErrHeld) {
		return nil, err
	}
	if pid > 0 && pid != os.Getpid() && isLeadHook(pid) {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	got := make(chan *flock.Lock, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := flock.Exclusive(path) // waits in the kernel
		if err != nil {
			errc <- err
			return
		}
		l.RecordPID()
		got <- l
	}()
	t := time.NewTimer(15 * time.Second) // one deadline
	defer t.Stop()
	select {
	case l := <-got:
		return l, nil
	case err := <-errc:
		return nil, err
	case <-t.C:
		return nil, fmt.Errorf("the lead's inbox is held by pid %d, which did not let go within 15s (is it stopped? kill it)", pid)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// isLeadHook reports whether pid runs orch's lead hook (and so may be
// asked to leave).
func isLeadHook(pid int) bool {
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return strings.Contains(string(cmd), "\x00lead\x00hook\x00")
}

// openInbox connects as the lead and opens rec's inbox, handing back at
// once what a dead taker held.
func openInbox(ctx context.Context, root string, rec inbox.Record, name string) (*nats.Conn, *inbox.Box, error) {
	cfg, err := notify.LeadConfig(orchdir.Of(root))
	if err != nil {
		return nil, nil, err
	}
	nc, err := notify.Connect(cfg, name)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrNotServing, err)
	}
	b, err := inbox.Open(ctx, nc, cfg.Prefix, rec)
	if err == nil {
		_, err = b.Rewind(ctx)
	}
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, b, nil
}

// takeNow hands over what is waiting as context for the model's next
// step, and exits HookOK (with nothing printed when nothing waits or orch
// serve is not running).
func takeNow(ctx context.Context, root string, rec inbox.Record, event string, s HookStreams) int {
	if !Serving(root) {
		return HookOK
	}
	nc, b, err := openInbox(ctx, root, rec, "orch-lead-hook")
	if err != nil {
		fmt.Fprintf(s.Err, "orch lead hook: %v\n", err)
		return HookError
	}
	defer nc.Close()
	bt, err := b.Take(ctx, false, 0)
	if errors.Is(err, inbox.ErrEmpty) {
		return HookOK
	}
	if err != nil {
		fmt.Fprintf(s.Err, "orch lead hook: %v\n", err)
		return HookError
	}
	return handOver(ctx, root, rec, bt, s, s.Out, leadagent.HookAnswer(event, bt.Lines()), HookOK)
}

// handOver writes a batch out and only then records and acknowledges it;
// a write that fails gives the batch back.
func handOver(ctx context.Context, root string, rec inbox.Record, bt *inbox.Batch, s HookStreams, w io.Writer, data []byte, code int) int {
	if _, err := w.Write(data); err != nil {
		bt.Nak()
		fmt.Fprintf(s.Err, "orch lead hook: writing the callbacks: %v (they stay for the next hook)\n", err)
		return HookError
	}
	if f, ok := w.(*os.File); ok {
		f.Sync() // a pipe: nothing to flush; a file: on disk
	}
	if err := inbox.AddTaken(orchDirOf(root), rec.Agent, bt.Items); err != nil {
		fmt.Fprintf(s.Err, "orch lead hook: recording the callbacks taken: %v\n", err)
	}
	if err := bt.Ack(context.WithoutCancel(ctx)); err != nil {
		// Handed over but not acknowledged: it comes again, once more.
		fmt.Fprintf(s.Err, "orch lead hook: %v\n", err)
	}
	return code
}

func orchDirOf(root string) string { return orchdir.Of(root) }

// waitAndWake waits until callbacks are waiting (orch serve may not be
// running yet, or restart meanwhile), writes them to stderr one line each
// and exits HookWake. It exits HookOK with nothing when ctx ends or its
// stderr's reader is gone (the lead that started it was killed).
func waitAndWake(ctx context.Context, root string, rec inbox.Record, s HookStreams) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if s.ErrFile != nil {
		go func() {
			if readerGone(s.ErrFile) {
				cancel()
			}
		}()
	}
	for {
		if err := waitServing(ctx, root); err != nil {
			return HookOK
		}
		// Uninstalled (or installed again) while this hook waited: it is
		// not this inbox's taker any more, and opening would make the
		// consumer uninstall deleted again.
		if now, err := inbox.LoadRecord(orchdir.Of(root), rec.Agent); err != nil || now.ID != rec.ID {
			return HookOK
		}
		bt, err := waitOnce(ctx, root, rec)
		if ctx.Err() != nil {
			if bt != nil {
				bt.Nak()
			}
			return HookOK
		}
		if err != nil {
			// orch serve stopped, or its broker refused: start again from
			// waiting for it, after one pause so a broker that refuses at
			// once is not asked again in a tight loop.
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return HookOK
			}
			continue
		}
		return handOver(ctx, root, rec, bt, s, s.Err, []byte(strings.Join(bt.Lines(), "\n")+"\n"), HookWake)
	}
}

// waitOnce connects and blocks until a batch is waiting; its connection
// stays open until the batch is acknowledged (the caller exits).
func waitOnce(ctx context.Context, root string, rec inbox.Record) (*inbox.Batch, error) {
	_, b, err := openInbox(ctx, root, rec, "orch-lead-hook-wait")
	if err != nil {
		return nil, err
	}
	return b.Take(ctx, true, hookSettle)
}

// waitServing returns once orch serve runs for root with its broker
// recorded, learning of it from fsnotify on .orch/, never on a timer.
func waitServing(ctx context.Context, root string) error {
	od := orchdir.Of(root)
	up := func() bool {
		if !Serving(root) {
			return false
		}
		ep, err := notify.ReadEndpoint(od)
		return err == nil && ep.PID == ServePID(root)
	}
	if up() {
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(od); err != nil {
		return err
	}
	for !up() {
		select {
		case <-w.Events:
		case err := <-w.Errors:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// LeadInbox is what orch inbox shows: the callbacks handed over to the
// lead agent that it has not acknowledged (orch ack), and those still
// waiting to be handed over.
type LeadInbox struct {
	Agent   string       `json:"agent"`
	Taken   []inbox.Item `json:"taken"`
	Waiting []inbox.Item `json:"waiting"`
	// Armed says a hook of the lead is waiting to wake it (its pid).
	Armed   bool   `json:"armed"`
	HookPID int    `json:"hook_pid,omitempty"`
	Note    string `json:"note,omitempty"`
}

// Inbox reads the lead agent's inbox without taking anything from it.
func Inbox(ctx context.Context, root, agent string) (LeadInbox, error) {
	v := LeadInbox{Agent: agent, Taken: []inbox.Item{}, Waiting: []inbox.Item{}}
	od := orchdir.Of(root)
	rec, err := inbox.LoadRecord(od, agent)
	if err != nil {
		return v, fmt.Errorf("inbox: %w", err)
	}
	taken, err := inbox.LoadTaken(od, agent)
	if err != nil {
		return v, fmt.Errorf("inbox: %w", err)
	}
	if taken != nil {
		v.Taken = taken
	}
	v.HookPID, v.Armed = flock.Holder(inbox.LockPath(od, agent))
	if !v.Armed {
		v.HookPID = 0
	}
	if !Serving(root) {
		v.Note = "orch serve is not running: what waits in its broker is not listed"
		return v, nil
	}
	cfg, err := notify.LeadConfig(od)
	if err != nil {
		return v, fmt.Errorf("inbox: %w", err)
	}
	nc, err := notify.Connect(cfg, "orch-inbox")
	if err != nil {
		return v, fmt.Errorf("inbox: %w: %v", ErrNotServing, err)
	}
	defer nc.Close()
	b, err := inbox.Open(ctx, nc, cfg.Prefix, rec)
	if err != nil {
		return v, fmt.Errorf("inbox: %w", err)
	}
	waiting, err := b.Peek(ctx, 1000)
	if err != nil {
		return v, fmt.Errorf("inbox: %w", err)
	}
	if waiting != nil {
		v.Waiting = waiting
	}
	return v, nil
}

// AckLead marks callbacks handed over to the lead agent as acted on: the
// given event ids, or all. An id it was not handed is an error and
// nothing is marked.
func AckLead(root, agent string, ids []string, all bool) ([]inbox.Item, error) {
	od := orchdir.Of(root)
	if _, err := inbox.LoadRecord(od, agent); err != nil {
		return nil, fmt.Errorf("ack: %w", err)
	}
	acked, unknown, err := inbox.AckTaken(od, agent, ids, all)
	if err != nil {
		return nil, fmt.Errorf("ack: %w", err)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("ack: %w: %s (orch inbox lists the ones handed over)", ErrNotTaken, strings.Join(unknown, ", "))
	}
	return acked, nil
}
