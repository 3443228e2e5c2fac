package broker

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/hosts"
	"github.com/orch-dev/orch/internal/orchdir"
)

// HostConfig is how orch host runs its server: on another machine, for
// that machine's workers, as a leaf node of the lead's.
type HostConfig struct {
	Dir     string // the host's .orch directory (its clone's)
	LeadURL string // the lead's leaf listener, nats-leaf://ADDR:PORT
	Token   hosts.Token
	Port    int // loopback port for the workers; 0 reuses the last if free
	// DupeWindow, MaxStore as in Config; 0: the same defaults.
	DupeWindow time.Duration
	MaxStore   int64
	Logger     *slog.Logger
}

// HostServer is a running host-side server.
type HostServer struct {
	cfg  HostConfig
	srv  *server.Server
	url  string
	keys roleKeys
}

// StartHost starts the host's server: loopback only for its workers (each
// with a key of its own under Dir/creds, made when missing), its own
// JetStream domain and stream HOST_<name> that keeps their events while
// the lead cannot be reached, and a leaf link to the lead that the lead's
// stream sources that stream through. It writes Dir/broker.json so the
// workers' orch-notify finds it as it finds a lead's.
func StartHost(ctx context.Context, cfg HostConfig) (*HostServer, error) {
	t := cfg.Token
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DupeWindow == 0 {
		cfg.DupeWindow = DupeWindow
	}
	if cfg.MaxStore == 0 {
		cfg.MaxStore = DefaultMaxStore
	}
	u, err := url.Parse(cfg.LeadURL)
	if err != nil || (u.Scheme != "nats-leaf" && u.Scheme != "nats") || u.Host == "" || u.Port() == "" || u.User != nil || u.Path != "" {
		return nil, fmt.Errorf("%w: %q: want nats-leaf://ADDR:PORT, the URL orch hosts add printed", ErrLeafAddr, cfg.LeadURL)
	}
	keys, err := loadKeys(cfg.Dir, t.Workers)
	if err != nil {
		return nil, err
	}
	port := cfg.Port
	if port == 0 {
		port = lastPort(cfg.Dir, "127.0.0.1")
	}
	opts := &server.Options{
		ServerName:         HostServerName(t.Host),
		Host:               "127.0.0.1",
		Port:               port,
		NoSigs:             true,
		JetStream:          true,
		JetStreamDomain:    hostDomain(t.Host),
		StoreDir:           filepath.Join(cfg.Dir, orchdir.JetStream),
		JetStreamMaxStore:  cfg.MaxStore,
		JetStreamMaxMemory: DefaultMaxMem,
		MaxPayload:         MaxEventBytes,
		// The workers here, and this process (with the host's local key,
		// lead.nk under Dir/creds), and nobody else.
		Nkeys:           hostWorkerUsers(keys, t.Prefix),
		NoSystemAccount: true,
		LeafNode: server.LeafNodeOpts{
			// The server retries a lost link by itself, every second.
			ReconnectInterval: time.Second,
			Remotes:           []*server.RemoteLeafOpts{{URLs: []*url.URL{u}, Nkey: t.Seed}},
		},
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start host server: %w", err)
	}
	srv.SetLoggerV2(&logAdapter{l: cfg.Logger}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("start host server: %w", ErrNotReady)
	}
	h := &HostServer{cfg: cfg, srv: srv, url: srv.ClientURL(), keys: keys}
	if err := h.setup(ctx); err != nil {
		h.Shutdown()
		return nil, err
	}
	ep := orchdir.Endpoint{URL: h.url, Prefix: t.Prefix, Stream: HostStream(t.Host), PID: os.Getpid()}
	if err := writeJSON(filepath.Join(cfg.Dir, orchdir.Broker), ep); err != nil {
		h.Shutdown()
		return nil, fmt.Errorf("start host server: %w", err)
	}
	return h, nil
}

// Connect opens an in-process connection with the host's local key.
func (h *HostServer) Connect(opts ...nats.Option) (*nats.Conn, error) {
	pub, err := h.keys.lead.PublicKey()
	if err != nil {
		return nil, err
	}
	return nats.Connect("", append([]nats.Option{nats.InProcessServer(h.srv), nats.Name("orch-host"),
		nats.Nkey(pub, h.keys.lead.Sign), nats.NoReconnect()}, opts...)...)
}

func (h *HostServer) setup(ctx context.Context) error {
	nc, err := h.Connect()
	if err != nil {
		return fmt.Errorf("host setup: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("host setup: %w", err)
	}
	t := h.cfg.Token
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        HostStream(t.Host),
		Description: "events of host " + t.Host + "'s workers, kept here until the lead has them",
		Subjects:    []string{t.Prefix + ".ev.>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxBytes:    StreamMaxBytes,
		MaxMsgSize:  MaxEventBytes,
		Duplicates:  h.cfg.DupeWindow,
		Discard:     jetstream.DiscardNew,
	})
	if err != nil {
		return fmt.Errorf("host setup: stream: %w", err)
	}
	_, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      hosts.WorkBucket,
		Description: "bundles of host " + t.Host + "'s plan branches, for the lead to take",
		Storage:     jetstream.FileStorage,
		MaxBytes:    StreamMaxBytes,
	})
	if err != nil {
		return fmt.Errorf("host setup: work store: %w", err)
	}
	return nil
}

// WorkChunk is the chunk size of a bundle in the work store: under the
// servers' largest message.
const WorkChunk = 32 << 10

// Token is the host's join token as parsed.
func (h *HostServer) Token() hosts.Token { return h.cfg.Token }

// URL is the loopback URL the host's workers connect to.
func (h *HostServer) URL() string { return h.url }

// Linked says whether the leaf link to the lead is up now (for a report,
// never waited on).
func (h *HostServer) Linked() bool { return h.srv.NumLeafNodes() > 0 }

// SignerKey is the public key a spool file signed by worker by must
// verify with, "" for one that is not this host's.
func (h *HostServer) SignerKey(by string) string { return h.keys.workers[by] }

// Shutdown stops the server and waits until it has.
func (h *HostServer) Shutdown() {
	h.srv.Shutdown()
	h.srv.WaitForShutdown()
}

// hostWorkerUsers are users (the host's own key, its workers') where a
// worker may not send the records the host makes about it (its process's
// exit, its pane's death), which reach the lead under the worker's
// subjects.
func hostWorkerUsers(k roleKeys, prefix string) []*server.NkeyUser {
	us := users(k, prefix, nil)
	for _, u := range us {
		if u.Nkey != k.leadPub {
			u.Permissions.Publish.Deny = []string{prefix + ".ev.*." + string(event.Exited), prefix + ".ev.*." + string(event.Died)}
		}
	}
	return us
}
