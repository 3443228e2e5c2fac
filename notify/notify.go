// Package notify is the client side of the event bus, small enough for the
// worker's orch-notify binary: it finds the broker (from the environment or
// from the repo's .orch/ directory), connects with a role's credentials,
// publishes one event and waits for the broker's durable acknowledgement,
// and spools the event to disk when the broker cannot be reached in time.
//
// It must not import the broker package: that would link a whole NATS server
// into every worker's notifier.
package notify

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/orchdir"
)

// Config is everything a client needs to reach the broker.
type Config struct {
	URL      string
	Prefix   string
	Seed     []byte // NKey seed of the role
	Inbox    string // custom inbox prefix, empty for the default
	SpoolDir string // where events go when the broker is unreachable; empty: none
	Signer   string // whose key Seed is, named in spool files: event.LeadSigner or a worker id
	Timeout  time.Duration
}

// Env is the environment as a lookup function, so tests need not touch the
// process environment.
type Env func(string) string

// FindDir returns the .orch directory of the repo containing dir. A linked
// git worktree counts as the repo: its .git file points into the main
// repository, whose .orch/ is used. It reads files only; it never runs git.
func FindDir(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(filepath.Join(d, orchdir.Name)); err == nil && fi.IsDir() {
			return filepath.Join(d, orchdir.Name), nil
		}
		gitPath := filepath.Join(d, ".git")
		if fi, err := os.Lstat(gitPath); err == nil {
			if fi.Mode().IsRegular() {
				if main, ok := mainFromGitFile(gitPath); ok {
					if fi, err := os.Stat(filepath.Join(main, orchdir.Name)); err == nil && fi.IsDir() {
						return filepath.Join(main, orchdir.Name), nil
					}
				}
			}
			return "", fmt.Errorf("%w: %s is a git repository without %s (run orch init there)", ErrNoRepo, d, orchdir.Name)
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%w: no %s found from %s upwards (run orch init in the repo, or set ORCH_URL and ORCH_CREDS)", ErrNoRepo, orchdir.Name, dir)
		}
	}
}

// mainFromGitFile follows a worktree's ".git" file ("gitdir: <main>/.git/worktrees/<name>")
// to the main repository's top level.
func mainFromGitFile(path string) (string, bool) {
	gitdir, ok := gitdirFromFile(path)
	if !ok {
		return "", false
	}
	// <main>/.git/worktrees/<name> -> <main>/.git -> <main>
	wt := filepath.Dir(gitdir)
	if filepath.Base(wt) != "worktrees" {
		return "", false
	}
	common := filepath.Dir(wt)
	return filepath.Dir(common), true
}

// gitdirFromFile reads a linked worktree's ".git" file ("gitdir: <path>")
// and returns the worktree's git directory, made absolute.
func gitdirFromFile(path string) (string, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
	if !ok {
		return "", false
	}
	gitdir = strings.TrimSpace(gitdir)
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(filepath.Dir(path), gitdir)
	}
	return gitdir, true
}

// ReadEndpoint reads broker.json from an .orch directory.
func ReadEndpoint(orchDir string) (orchdir.Endpoint, error) {
	ep, err := orchdir.ReadEndpoint(orchDir, event.DefaultPrefix)
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		return ep, fmt.Errorf("%w: %v (is orch serve running?)", ErrNoBroker, err)
	case err != nil:
		return ep, fmt.Errorf("%w: %s: %v", ErrNoBroker, orchdir.Broker, err)
	}
	return ep, nil
}

// WorkerConfig builds the config of the worker ORCH_WORKER names. The
// environment wins: ORCH_URL with ORCH_TOKEN (the seed itself) or
// ORCH_CREDS (a file holding it), ORCH_PREFIX, ORCH_SPOOL. What it does not
// give is read from the .orch directory found from cwd (or named by
// ORCH_DIR): the broker's endpoint, and the worker's own key,
// creds/workers/<wN>.nk.
func WorkerConfig(env Env, cwd string) (Config, error) {
	worker := env("ORCH_WORKER")
	inbox := event.WorkerInbox
	if event.ValidWorker(worker) {
		inbox = event.WorkerInboxOf(worker)
	}
	cfg := Config{Inbox: inbox, Timeout: 3 * time.Second, URL: env("ORCH_URL"), Prefix: env("ORCH_PREFIX"), SpoolDir: env("ORCH_SPOOL"), Signer: worker}
	if d, err := time.ParseDuration(env("ORCH_NOTIFY_TIMEOUT")); err == nil && d > 0 {
		cfg.Timeout = d
	}
	orchDir := env("ORCH_DIR")
	var dirErr error
	if orchDir == "" {
		orchDir, dirErr = FindDir(cwd)
	}
	if orchDir != "" {
		if cfg.SpoolDir == "" {
			cfg.SpoolDir = filepath.Join(orchDir, orchdir.Spool)
		}
		if cfg.URL == "" || cfg.Prefix == "" {
			if ep, err := ReadEndpoint(orchDir); err == nil {
				if cfg.URL == "" {
					cfg.URL = ep.URL
				}
				if cfg.Prefix == "" {
					cfg.Prefix = ep.Prefix
				}
			}
		}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = event.DefaultPrefix
	}
	switch {
	case env("ORCH_TOKEN") != "":
		cfg.Seed = []byte(strings.TrimSpace(env("ORCH_TOKEN")))
	case env("ORCH_CREDS") != "" && !legacyShared(env("ORCH_CREDS")):
		seed, err := readSeed(env("ORCH_CREDS"))
		if err != nil {
			return cfg, err
		}
		cfg.Seed = seed
	case orchDir != "":
		// Each worker has a key of its own; a pane started by an orch from
		// before per-worker keys still names the old shared file in
		// ORCH_CREDS, and is given its own key the same way.
		if !event.ValidWorker(worker) {
			return cfg, fmt.Errorf("%w: ORCH_WORKER is not set to a worker id like w1: orch-notify sends as one worker, with its key %s", ErrNoCreds, orchdir.WorkerKey(orchDir, "<wN>"))
		}
		seed, err := readSeed(orchdir.WorkerKey(orchDir, worker))
		if err != nil {
			return cfg, err
		}
		cfg.Seed = seed
	default:
		return cfg, dirErr
	}
	if cfg.URL == "" && cfg.SpoolDir == "" {
		return cfg, fmt.Errorf("%w: no ORCH_URL and no .orch directory to spool into", ErrNoBroker)
	}
	return cfg, nil
}

// legacyShared says whether path is the worker seed all workers shared
// before each had its own (.orch/creds/worker.nk): the broker takes it no
// more.
func legacyShared(path string) bool {
	return filepath.Base(path) == orchdir.WorkerCreds && filepath.Base(filepath.Dir(path)) == orchdir.Creds
}

// LeadConfig builds the lead role's config from an .orch directory, for the
// orch CLI talking to a running orch serve.
func LeadConfig(orchDir string) (Config, error) {
	ep, err := ReadEndpoint(orchDir)
	if err != nil {
		return Config{}, err
	}
	cfg, err := LeadSpoolConfig(orchDir)
	if err != nil {
		return Config{}, err
	}
	cfg.URL, cfg.Prefix, cfg.Timeout = ep.URL, ep.Prefix, 3*time.Second
	return cfg, nil
}

// LeadSpoolConfig is the lead role's config without a broker: enough to
// spool a command, signed, for orch serve's next start.
func LeadSpoolConfig(orchDir string) (Config, error) {
	seed, err := readSeed(filepath.Join(orchDir, orchdir.Creds, orchdir.LeadCreds))
	if err != nil {
		return Config{}, err
	}
	return Config{Seed: seed, Signer: event.LeadSigner, SpoolDir: filepath.Join(orchDir, orchdir.Spool)}, nil
}

func readSeed(path string) ([]byte, error) {
	// Without blocking: a FIFO in the seed's place must not hang a worker's
	// last step.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCreds, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrNoCreds, err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file (mode %v): a seed is a file that orch init or orch serve writes", ErrNoCreds, path, fi.Mode())
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%w: %s is readable or writable by others (mode %v): chmod 600 %s", ErrNoCreds, path, fi.Mode(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCreds, err)
	}
	return []byte(strings.TrimSpace(string(data))), nil
}

// Connect opens a connection with the role's NKey. It does not reconnect:
// callers are short-lived, and a lost broker means "spool", not "wait".
func Connect(cfg Config, name string) (*nats.Conn, error) {
	s, err := newSigner(cfg.Seed)
	if err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.Nkey(s.pub, s.Sign),
		nats.Timeout(cfg.Timeout),
		nats.NoReconnect(),
	}
	if cfg.Inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.Inbox))
	}
	return nats.Connect(cfg.URL, opts...)
}

// connectErr says why a connection failed: a credential the broker
// refused, or one that is not a seed at all, is the worker's to fix and
// never a reason to spool (the lead would take the event from the spool
// without the check the broker just made); anything else means the
// broker is not there.
func connectErr(err error) error {
	switch {
	case errors.Is(err, ErrNoCreds):
		return err
	case errors.Is(err, nats.ErrAuthorization), strings.Contains(strings.ToLower(err.Error()), "authorization violation"):
		return fmt.Errorf("%w: %v", ErrRefusedCreds, err)
	}
	return fmt.Errorf("%w: %v", ErrNoBroker, err)
}

// Result says how an event was kept.
type Result struct {
	Acked     bool   // stored by the broker
	Duplicate bool   // the broker already had this id
	Seq       uint64 // stream sequence, when acked
	Spooled   string // spool file, when not acked
	PubErr    error  // why publishing failed, when spooled
}

// Send publishes e and waits for the durable acknowledgement; when the
// broker cannot be reached or does not answer within cfg.Timeout it writes
// e to the spool instead. An error means the event was not kept at all.
func Send(cfg Config, e event.Event) (Result, error) {
	deadline := time.Now().Add(cfg.Timeout)
	var res Result
	// The seed is checked before anything else: an invalid one can neither
	// connect nor sign a spool file.
	sg, err := newSigner(cfg.Seed)
	if err != nil {
		return res, fmt.Errorf("%w: %w", event.ErrNotKept, err)
	}
	by := cfg.Signer
	if by == "" {
		by = e.Worker
	}
	if cfg.URL != "" {
		seq, dup, err := publish(cfg, e, deadline)
		if err == nil {
			return Result{Acked: true, Duplicate: dup, Seq: seq}, nil
		}
		if errors.Is(err, ErrNoCreds) || errors.Is(err, ErrRefusedCreds) {
			return res, fmt.Errorf("%w: %v", event.ErrNotKept, err)
		}
		res.PubErr = err
	} else {
		res.PubErr = fmt.Errorf("%w: no broker URL", ErrNoBroker)
	}
	if cfg.SpoolDir == "" {
		return res, fmt.Errorf("%w: %v, and there is no spool directory", event.ErrNotKept, res.PubErr)
	}
	if by != event.LeadSigner && !event.ValidWorker(by) {
		return res, fmt.Errorf("%w: %v, and a spool file must be signed by a worker: set ORCH_WORKER", event.ErrNotKept, res.PubErr)
	}
	path, err := event.WriteSpool(cfg.SpoolDir, e, event.SpoolSigner{By: by, Sign: sg.Sign})
	if err != nil {
		return res, fmt.Errorf("%w: %v; %v", event.ErrNotKept, res.PubErr, err)
	}
	res.Spooled = path
	return res, nil
}

type pubAck struct {
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
	Error     *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// publish is a JetStream publish done by hand on the core client: a request
// whose reply is the stream's PubAck. It keeps orch-notify from linking the
// jetstream package.
//
// It is orch-notify's whole connection, so it does not go through
// RequestMsg's reply multiplexer, which is made for many requests on one
// connection: that one subscribes with a handler goroutine, through which
// every reply passes before it reaches the caller. One request needs one
// reply subject, subscribed synchronously: the connection's reader hands the
// PubAck straight to NextMsg. The SUB still leaves in the same write as the
// PUB, and the handshake is nats.go's own (INFO, CONNECT with the NKey
// signature, PING, PONG).
func publish(cfg Config, e event.Event, deadline time.Time) (uint64, bool, error) {
	c := cfg
	c.Timeout = time.Until(deadline)
	nc, err := Connect(c, "orch-notify")
	if err != nil {
		return 0, false, connectErr(err)
	}
	defer nc.Close()
	reply := nc.NewInbox()
	sub, err := nc.SubscribeSync(reply)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %v", ErrNoBroker, err)
	}
	// A publish on a subject this credential may not use (another
	// worker's) is answered by an asynchronous -ERR, not a reply: it ends
	// the wait at once, and is a refusal, never a reason to spool.
	var denied error
	var mu sync.Mutex
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			mu.Lock()
			denied = err
			mu.Unlock()
			sub.Unsubscribe()
		}
	})
	msg := EventMsg(cfg.Prefix, e)
	msg.Reply = reply
	if err := nc.PublishMsg(msg); err != nil {
		return 0, false, fmt.Errorf("%w: %v", ErrNoBroker, err)
	}
	ack, err := sub.NextMsg(time.Until(deadline))
	mu.Lock()
	if denied != nil {
		err = denied
	}
	mu.Unlock()
	if errors.Is(err, nats.ErrPermissionViolation) {
		return 0, false, fmt.Errorf("%w: it may not send on %s (ORCH_WORKER=%s with another worker's key?): %v", ErrRefusedCreds, msg.Subject, e.Worker, err)
	}
	if err == nil && len(ack.Data) == 0 && ack.Header.Get("Status") == "503" {
		err = nats.ErrNoResponders // what RequestMsg makes of the server's no-responders status
	}
	return readAck(ack, msg.Subject, err)
}

// EventMsg is e as a message: on its kind's subject, with the event id as
// the message id, so the broker drops a second copy inside its duplicate
// window.
func EventMsg(prefix string, e event.Event) *nats.Msg {
	msg := nats.NewMsg(event.Subject(prefix, e))
	msg.Header.Set(nats.MsgIdHdr, e.ID)
	msg.Data = e.Marshal()
	return msg
}

// PublishOn publishes e on an open connection and waits up to timeout for
// the durable acknowledgement. The event id is the message id, so the
// broker drops a second copy inside its duplicate window.
func PublishOn(nc *nats.Conn, prefix string, e event.Event, timeout time.Duration) (uint64, bool, error) {
	return PublishMsg(nc, EventMsg(prefix, e), timeout)
}

// PublishMsg publishes msg to the stream that stores its subject and waits
// up to timeout for the PubAck. The message id header, if set, makes the
// broker drop a second copy.
func PublishMsg(nc *nats.Conn, msg *nats.Msg, timeout time.Duration) (uint64, bool, error) {
	reply, err := nc.RequestMsg(msg, timeout)
	return readAck(reply, msg.Subject, err)
}

// readAck reads the stream's answer to a publish on subject, or what went
// wrong waiting for it.
func readAck(reply *nats.Msg, subject string, err error) (uint64, bool, error) {
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return 0, false, fmt.Errorf("%w: no stream stores %s", ErrNoBroker, subject)
		}
		return 0, false, fmt.Errorf("%w: %v", ErrNoBroker, err)
	}
	var ack pubAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return 0, false, fmt.Errorf("%w: unreadable acknowledgement: %v", ErrRejected, err)
	}
	if ack.Error != nil {
		return 0, false, fmt.Errorf("%w: %s (code %d)", ErrRejected, ack.Error.Description, ack.Error.ErrCode)
	}
	return ack.Seq, ack.Duplicate, nil
}
