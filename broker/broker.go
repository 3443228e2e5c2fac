// Package broker runs the NATS server embedded in the lead loop, with
// JetStream storing the repo's events under .orch/.
//
// How the pieces fit: orch serve calls Start, which loads (or creates) one
// NKey for the lead and one per worker in .orch/creds/ (mode 0600), starts
// nats-server bound to 127.0.0.1, makes sure the event stream and the
// lead's consumers exist, and writes broker.json so workers and the orch
// CLI can find it. Each worker holds its own key, which may publish events
// on subjects carrying its id and nothing else. The lead loop
// talks to the server in-process; the orch CLI (dispatch, wait) connects
// over loopback with the lead key. With Config.Upstream (orch serve --nats)
// the server keeps no JetStream of its own: it links as a leaf node to an
// external cluster, which holds the stream, replicated (upstream.go).
//
// The bus, <prefix>.bus.<wN>.<topic>, is a stream of its own (BusStream).
// The stream (one per repo) keeps three kinds of subject under a prefix:
//
//	<prefix>.ev.<wN>.<kind>  worker events (started, done, blocked), by worker
//	<prefix>.cmd.<kind>   the lead's commands (dispatch)
//	<prefix>.cb.<kind>    callbacks for the lead, produced by the lead loop after it handled an event
//
// The "lead" consumer delivers events and commands to the lead loop; the
// "wait" consumer hands callbacks, one at a time, to orch wait. Both are
// durable push consumers: the server sends when there is something to send,
// nobody asks.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/orchdir"
)

// Names of the stream and consumers.
const (
	StreamName   = "ORCH"
	LeadConsumer = "lead"
	WaitConsumer = "wait"
	WaitGroup    = "wait"
)

// Limits keep a runaway fleet from filling the disk or memory.
const (
	DefaultMaxStore = 1 << 30 // JetStream file store, bytes
	DefaultMaxMem   = 64 << 20
	StreamMaxBytes  = 512 << 20
	MaxEventBytes   = event.MaxBytes
	DupeWindow      = 10 * time.Minute
	// AckWait is how long the lead loop has to finish an event before the
	// server redelivers it; harvests are a few git commands, far below it.
	AckWait = 60 * time.Second
)

// Config says where and how to run the broker.
type Config struct {
	Dir      string // the repo's .orch directory
	Host     string // default 127.0.0.1
	Port     int    // preferred port; 0 reuses the last one if free, else any free port
	Prefix   string // subject prefix, default "orch"
	MaxStore int64
	MaxMem   int64
	// DupeWindow is how long the stream remembers message ids to drop
	// copies; 0 means DupeWindow. Copies arriving later are caught by the
	// lead loop's own record of handled ids.
	DupeWindow time.Duration
	// Workers are the worker ids that get a credential of their own
	// (creds/workers/<id>.nk, made when missing).
	Workers []string
	// Upstream, when set, keeps the stream on an external cluster: the
	// server links to it as a leaf node (upstream.go).
	Upstream *Upstream
	// Leaf, when set, is the HOST:PORT other hosts' servers dial as leaf
	// nodes (orch serve --leaf); Hosts are the ones let in (package hosts).
	Leaf  string
	Hosts []hosts.Host
	// OnLink, when set, is called (on a goroutine of the broker's) after
	// a leaf link is made and the sources are set up again.
	OnLink func()
	Logger *slog.Logger
}

// Broker is a running embedded server.
type Broker struct {
	cfg    Config
	srv    *server.Server
	opts   *server.Options // as started, then as last reloaded
	url    string
	leadKP nkeys.KeyPair
	keys   roleKeys
	// mu guards the hosts (cfg.Hosts, opts) and the sources' refresh;
	// kickMu the kick's timer (leafLinked).
	mu       sync.Mutex
	kickMu   sync.Mutex
	kickOnce *time.Timer
	lastKick time.Time
	stopped  bool
}

// Start starts the server and makes sure the stream and consumers exist. It
// installs no signal handlers and its logger never exits the process.
func Start(ctx context.Context, cfg Config) (*Broker, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Prefix == "" {
		cfg.Prefix = event.DefaultPrefix
	}
	if cfg.MaxStore == 0 {
		cfg.MaxStore = DefaultMaxStore
	}
	if cfg.MaxMem == 0 {
		cfg.MaxMem = DefaultMaxMem
	}
	if cfg.DupeWindow == 0 {
		cfg.DupeWindow = DupeWindow
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	keys, err := loadKeys(cfg.Dir, cfg.Workers)
	if err != nil {
		return nil, err
	}
	leaf, err := leafOpts(cfg.Leaf)
	if err != nil {
		return nil, err
	}
	port := cfg.Port
	if port == 0 {
		port = lastPort(cfg.Dir, cfg.Host)
	}
	opts := &server.Options{
		ServerName:         "orch",
		Host:               cfg.Host,
		Port:               port,
		NoSigs:             true,
		NoLog:              false,
		JetStream:          true,
		StoreDir:           filepath.Join(cfg.Dir, "jetstream"),
		JetStreamMaxStore:  cfg.MaxStore,
		JetStreamMaxMemory: cfg.MaxMem,
		MaxPayload:         MaxEventBytes,
		Nkeys:              users(keys, cfg.Prefix, cfg.Hosts),
		NoSystemAccount:    true,
		LeafNode:           leaf,
		// Its own JetStream requests to a host's domain get replies under
		// that domain's name, so each host's key may answer only its own.
		FeatureFlags: map[string]bool{server.FeatureFlagJsAPIReplyFormatV2: true},
	}
	if cfg.Upstream != nil {
		if err := linkTo(opts, cfg.Upstream); err != nil {
			return nil, fmt.Errorf("start broker: %w", err)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start broker: %w", err)
	}
	b := &Broker{cfg: cfg, srv: srv, opts: opts.Clone(), leadKP: keys.lead, keys: keys}
	srv.SetLoggerV2(&logAdapter{l: cfg.Logger, leaf: b.leafLinked}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("start broker: %w", ErrNotReady)
	}
	b.url = srv.ClientURL()
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		b.opts.Port = a.Port // as bound: a reload must not ask for another
	}
	if cfg.Upstream != nil {
		if err := b.waitUpstream(ctx); err != nil {
			b.Shutdown()
			return nil, err
		}
	}
	if err := b.setup(ctx); err != nil {
		b.Shutdown()
		return nil, err
	}
	ep := orchdir.Endpoint{URL: b.url, Prefix: cfg.Prefix, Stream: StreamName, PID: os.Getpid(), Upstream: cfg.Upstream.Hosts(), Leaf: b.LeafURL()}
	if err := writeJSON(filepath.Join(cfg.Dir, orchdir.Broker), ep); err != nil {
		b.Shutdown()
		return nil, fmt.Errorf("start broker: %w", err)
	}
	return b, nil
}

// lastPort returns the port of the previous run if it is free now, so
// workers started before a restart still find the broker at their ORCH_URL.
// Otherwise -1: any free port.
func lastPort(dir, host string) int {
	ep, err := orchdir.ReadEndpoint(dir, event.DefaultPrefix)
	if err != nil {
		return server.RANDOM_PORT
	}
	_, p, err := net.SplitHostPort(trimScheme(ep.URL))
	if err != nil {
		return server.RANDOM_PORT
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 {
		return server.RANDOM_PORT
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, p))
	if err != nil {
		return server.RANDOM_PORT
	}
	l.Close()
	return port
}

func trimScheme(u string) string {
	for _, s := range []string{"nats://", "tls://"} {
		if len(u) > len(s) && u[:len(s)] == s {
			return u[len(s):]
		}
	}
	return u
}

// URL is the loopback URL workers connect to.
func (b *Broker) URL() string { return b.url }

// Interest says whether any client subscribes to subject.
func (b *Broker) Interest(subject string) bool {
	return b.srv.GlobalAccount().SubscriptionInterest(subject)
}

// Prefix is the subject prefix.
func (b *Broker) Prefix() string { return b.cfg.Prefix }

// Shutdown stops the server and waits until it has.
func (b *Broker) Shutdown() {
	b.kickMu.Lock()
	b.stopped = true
	if b.kickOnce != nil {
		b.kickOnce.Stop()
	}
	b.kickMu.Unlock()
	b.srv.Shutdown()
	b.srv.WaitForShutdown()
}

// ConnectLead opens an in-process connection with the lead role: no socket,
// no reconnects (the server lives and dies with this process).
func (b *Broker) ConnectLead(opts ...nats.Option) (*nats.Conn, error) {
	pub, err := b.leadKP.PublicKey()
	if err != nil {
		return nil, err
	}
	return nats.Connect("", append([]nats.Option{nats.InProcessServer(b.srv), nats.Name("orch-serve"),
		nats.Nkey(pub, b.leadKP.Sign), nats.NoReconnect()}, opts...)...)
}

// setup creates or updates the stream and the two durable push consumers.
func (b *Broker) setup(ctx context.Context) error {
	nc, err := b.ConnectLead()
	if err != nil {
		return fmt.Errorf("broker setup: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("broker setup: %w", err)
	}
	p := b.cfg.Prefix
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        StreamName,
		Description: "orch events, commands and callbacks of one repo",
		Subjects:    []string{p + ".ev.>", p + ".cmd.>", p + ".cb.>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxBytes:    StreamMaxBytes,
		MaxMsgSize:  MaxEventBytes,
		Duplicates:  b.cfg.DupeWindow,
		Replicas:    b.replicas(),
		// When full, refuse new messages (orch-notify then spools them)
		// rather than drop old ones nobody has handled yet.
		Discard: jetstream.DiscardNew,
		Sources: hostSources(b.cfg.Hosts, p),
	})
	if err != nil {
		return fmt.Errorf("broker setup: stream: %w", b.streamErr(err))
	}
	if _, err := js.CreateOrUpdateStream(ctx, busStreamConfig(p, b.cfg.DupeWindow, b.replicas())); err != nil {
		return fmt.Errorf("broker setup: stream %s: %w", BusStream, b.streamErr(err))
	}
	if _, err := js.PushConsumer(ctx, StreamName, LeadConsumer); errors.Is(err, jetstream.ErrConsumerNotFound) {
		_, err = js.CreatePushConsumer(ctx, StreamName, leadConsumerConfig(p, 0))
		if err != nil {
			return fmt.Errorf("broker setup: consumer %s: %w", LeadConsumer, err)
		}
	} else if err != nil {
		return fmt.Errorf("broker setup: consumer %s: %w", LeadConsumer, err)
	}
	_, err = js.CreateOrUpdatePushConsumer(ctx, StreamName, jetstream.ConsumerConfig{
		Durable:        WaitConsumer,
		Description:    "callbacks for orch wait, one at a time",
		DeliverSubject: WaitDeliver(p),
		DeliverGroup:   WaitGroup,
		FilterSubject:  p + ".cb.>",
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        30 * time.Second,
		MaxDeliver:     -1,
		MaxAckPending:  1, // orch wait takes exactly one
	})
	if err != nil {
		return fmt.Errorf("broker setup: consumer %s: %w", WaitConsumer, err)
	}
	return nil
}

// The bus (orch-notify say, orch bus) is a stream of its own: findings are
// read by people and agents, not handled by the lead loop, so they are
// never trimmed with its events; when the bus is full its oldest says go,
// and a chatty fleet can never fill the event stream.
const (
	BusStream   = "ORCH_BUS"
	BusMaxBytes = 64 << 20
	BusMaxMsgs  = 100_000
)

func busStreamConfig(p string, dupe time.Duration, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        BusStream,
		Description: "orch's worker bus: what workers say to each other",
		Subjects:    []string{p + ".bus.>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxBytes:    BusMaxBytes,
		MaxMsgs:     BusMaxMsgs,
		MaxMsgSize:  MaxEventBytes,
		Duplicates:  dupe,
		Replicas:    replicas,
		Discard:     jetstream.DiscardOld,
	}
}

// leadConsumerConfig is the lead loop's consumer: every event and command,
// from startSeq (0: from the beginning), acknowledged one by one after its
// effect, redelivered forever until then.
func leadConsumerConfig(p string, startSeq uint64) jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{
		Durable:        LeadConsumer,
		Description:    "events and commands for the lead loop",
		DeliverSubject: LeadDeliver(p),
		FilterSubjects: []string{p + ".ev.>", p + ".cmd.>"},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        AckWait,
		MaxDeliver:     -1, // never give up on an event: nothing lost
		MaxAckPending:  1024,
	}
	if startSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, startSeq
	}
	return cfg
}

// RewindLead makes the lead consumer hand out again, right away, every
// message that was delivered but not acknowledged when the previous lead
// loop stopped (a crash between effect and ack). Without it the server
// would wait out AckWait first. The consumer is recreated to start just
// above its acknowledgement floor; messages acknowledged out of order above
// the floor come again too, and the lead loop's record of handled event ids
// makes them no-ops. A crash between the delete and the create leaves no
// consumer, and the next Start recreates it from the beginning: slower,
// equally correct.
func (b *Broker) RewindLead(ctx context.Context) (pending int, err error) {
	nc, err := b.ConnectLead()
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	c, err := js.PushConsumer(ctx, StreamName, LeadConsumer)
	if err != nil {
		return 0, fmt.Errorf("rewind: %w", err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("rewind: %w", err)
	}
	if info.NumAckPending == 0 {
		return 0, nil
	}
	if err := js.DeleteConsumer(ctx, StreamName, LeadConsumer); err != nil {
		return 0, fmt.Errorf("rewind: %w", err)
	}
	if _, err := js.CreatePushConsumer(ctx, StreamName, leadConsumerConfig(b.cfg.Prefix, info.AckFloor.Stream+1)); err != nil {
		return 0, fmt.Errorf("rewind: %w", err)
	}
	return info.NumAckPending, nil
}

// LeadDeliver is the subject the lead consumer pushes to.
func LeadDeliver(prefix string) string { return prefix + ".deliver.lead" }

// WaitDeliver is the subject the wait consumer pushes to.
func WaitDeliver(prefix string) string { return prefix + ".deliver.wait" }

// CallbackSubject is where the lead loop publishes a callback of a kind.
func CallbackSubject(prefix, kind string) string { return prefix + ".cb." + kind }

// users gives the lead and each worker its NKey and permissions. A worker
// may publish events and says (the bus) on the subjects that carry its own
// id and receive the replies to its own publishes; it cannot speak for another worker, read
// events, consume, or touch the JetStream API.
func users(k roleKeys, prefix string, hs []hosts.Host) []*server.NkeyUser {
	out := []*server.NkeyUser{
		{Nkey: k.leadPub, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{">"}},
			Subscribe: &server.SubjectPermission{Allow: []string{">"}},
		}},
	}
	for _, id := range slices.Sorted(maps.Keys(k.workers)) {
		out = append(out, &server.NkeyUser{Nkey: k.workers[id], Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{event.WorkerSubjects(prefix, id), event.WorkerBusSubjects(prefix, id)}},
			Subscribe: &server.SubjectPermission{Allow: []string{event.WorkerInboxOf(id) + ".>"}},
		}})
	}
	return append(out, hostUsers(hs, prefix)...)
}

// WorkerKey is the public key of worker id's credential, "" if the
// broker has none for it.
func (b *Broker) WorkerKey(id string) string { return b.keys.workers[id] }

// LeadKey is the public key of the lead's credential.
func (b *Broker) LeadKey() string { return b.keys.leadPub }

// SpoolSigner signs the lead's spool files (its records, when the broker
// does not take them) with the lead's key.
func (b *Broker) SpoolSigner() event.SpoolSigner {
	return event.SpoolSigner{By: event.LeadSigner, Sign: b.leadKP.Sign}
}

// SignerKey is the public key a spool file signed by by must verify with:
// the lead's, or a worker's this broker knows; "" for anyone else.
func (b *Broker) SignerKey(by string) string {
	if by == event.LeadSigner {
		return b.keys.leadPub
	}
	return b.keys.workers[by]
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFile0600(path, append(data, '\n'))
}

// writeFile0600 writes atomically with mode 0600.
func writeFile0600(path string, data []byte) error {
	return atomicfile.Write(path, data, 0o600)
}
