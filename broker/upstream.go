package broker

// An external cluster (orch serve --nats). The embedded server keeps its
// job towards the workers: it still listens on loopback only, with one NKey
// user per worker, so each worker keeps its own identity and its loopback
// hop. It runs without JetStream and links to the cluster as a leaf node;
// the stream and the consumers live on the cluster, replicated (R3).
//
// A leaf node does not pass $JS.API.> across the link for an ordinary
// account (nats-server denies it both ways, so that two JetStreams never
// answer one request). What crosses is the domain form of the API,
// $JS.<domain>.API.>, which the cluster maps back to its own $JS.API.>
// when its JetStream has that domain. So the embedded server maps its
// account's $JS.API.> to $JS.<domain>.API.>: every client of it (the lead
// loop in-process, the orch CLI over loopback) keeps using the plain API
// and reaches the cluster's JetStream, and nothing else in orch changes.
// Workers' permissions are checked on the mapped subject too: they still
// reach no JetStream API.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// UpstreamReplicas is how many copies of the stream the cluster keeps:
// one server may die with nothing lost.
const UpstreamReplicas = 3

// UpstreamWait bounds how long Start waits for the leaf link and the
// cluster's JetStream to answer before it gives up.
const UpstreamWait = 30 * time.Second

// upstreamRetryGap is the pause between two tries of a JetStream request
// that failed while the link was coming up (see waitUpstream).
const upstreamRetryGap = 500 * time.Millisecond

// Upstream is an external NATS cluster the broker links to as a leaf node.
// Make one with ParseUpstream.
type Upstream struct {
	// URLs are the cluster's leaf node URLs (nats://host:7422), tried in turn.
	URLs []*url.URL
	// Domain is the JetStream domain of the cluster (jetstream { domain }
	// in its configuration): a leaf node reaches JetStream only through it.
	Domain string
	// Creds is a file with the credential the link authenticates with: a
	// JWT .creds file, or an NKey user seed (SU...). Empty: no credential.
	Creds string
}

// ParseUpstream checks the --nats, --nats-domain and --creds values: nats://
// URLs with a host and port, a domain, a credential file readable by its
// owner only that holds a .creds JWT or an NKey user seed.
func ParseUpstream(urls, domain, creds string) (*Upstream, error) {
	u := &Upstream{Domain: strings.TrimSpace(domain), Creds: creds}
	for _, s := range strings.Split(urls, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		pu, err := url.Parse(s)
		if err != nil || pu.Scheme != "nats" || pu.Hostname() == "" || pu.Port() == "" || (pu.Path != "" && pu.Path != "/") {
			if pu != nil && pu.Scheme == "tls" {
				return nil, fmt.Errorf("%w: %s: TLS to the cluster is not supported yet; use a nats:// leaf node URL", ErrUpstreamConfig, redact(s))
			}
			return nil, fmt.Errorf("%w: %q is not a nats://host:port URL of a leaf node port of the cluster (7422 by default)", ErrUpstreamConfig, redact(s))
		}
		if pu.User != nil {
			// A password on the command line is in ps and shell history.
			return nil, fmt.Errorf("%w: %s carries a user or password: put the credential in a file given with --creds (mode 600)", ErrUpstreamConfig, redact(s))
		}
		u.URLs = append(u.URLs, pu)
	}
	if len(u.URLs) == 0 {
		return nil, fmt.Errorf("%w: no URL given", ErrUpstreamConfig)
	}
	if u.Domain == "" || strings.ContainsAny(u.Domain, ".*> \t") {
		return nil, fmt.Errorf("%w: the cluster's JetStream domain is needed (jetstream { domain: NAME } in its servers' configuration; a leaf node reaches JetStream only through a domain)", ErrUpstreamConfig)
	}
	if creds != "" {
		if _, err := u.remote(); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// Hosts are the cluster's URLs without any user or password, to show.
func (u *Upstream) Hosts() []string {
	if u == nil {
		return nil
	}
	out := make([]string, len(u.URLs))
	for i, pu := range u.URLs {
		out[i] = pu.Scheme + "://" + pu.Host
	}
	return out
}

// redact is s as an error may quote it: without a user or password, and
// not at all when it does not parse (it could hold one).
func redact(s string) string {
	pu, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if pu.User != nil {
		pu.User = nil
		return pu.String()
	}
	return s
}

// remote is the leaf node remote: the URLs and the credential, read from
// its file now (a seed) or by the server at each connect (a .creds file).
// No error or log line ever carries the file's content.
func (u *Upstream) remote() (*server.RemoteLeafOpts, error) {
	r := &server.RemoteLeafOpts{URLs: u.URLs}
	if u.Creds == "" {
		return r, nil
	}
	fi, err := os.Stat(u.Creds)
	if err != nil {
		return nil, fmt.Errorf("%w: --creds: %v", ErrUpstreamConfig, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("--creds %s has mode %o: %w (run chmod 600 %s)", u.Creds, fi.Mode().Perm(), ErrCredsMode, u.Creds)
	}
	data, err := os.ReadFile(u.Creds)
	if err != nil {
		return nil, fmt.Errorf("%w: --creds: %v", ErrUpstreamConfig, err)
	}
	text := strings.TrimSpace(string(data))
	switch {
	case strings.Contains(text, "-----BEGIN NATS USER JWT-----"):
		if _, err := jwtSeed(data); err != nil {
			return nil, fmt.Errorf("%w: --creds %s: a .creds file without a valid user seed", ErrUpstreamConfig, u.Creds)
		}
		r.Credentials = u.Creds
	case strings.HasPrefix(text, "SU") && !strings.ContainsAny(text, " \n"):
		if _, err := nkeys.FromSeed([]byte(text)); err != nil {
			return nil, fmt.Errorf("%w: --creds %s: not a valid NKey user seed", ErrUpstreamConfig, u.Creds)
		}
		r.Nkey = text
	default:
		return nil, fmt.Errorf("%w: --creds %s: neither a JWT .creds file nor an NKey user seed (SU...)", ErrUpstreamConfig, u.Creds)
	}
	return r, nil
}

// jwtSeed checks that a .creds file holds a user seed after its JWT.
func jwtSeed(data []byte) (nkeys.KeyPair, error) {
	return nkeys.ParseDecoratedUserNKey(data)
}

// linkTo turns the embedded server's options into a leaf node of u:
// no JetStream of its own, one remote.
func linkTo(opts *server.Options, u *Upstream) error {
	r, err := u.remote()
	if err != nil {
		return err
	}
	opts.JetStream, opts.StoreDir = false, ""
	opts.LeafNode.Remotes = []*server.RemoteLeafOpts{r}
	return nil
}

// waitUpstream maps the JetStream API into the cluster's domain and
// waits until the cluster's JetStream answers through the link. The link
// comes up on its own after Start; until then a request finds no
// responders at once (or times out, while the cluster elects a leader).
func (b *Broker) waitUpstream(ctx context.Context) error {
	u := b.cfg.Upstream
	if err := b.srv.GlobalAccount().AddMapping("$JS.API.>", "$JS."+u.Domain+".API.>"); err != nil {
		return fmt.Errorf("broker: upstream: %w", err)
	}
	nc, err := b.ConnectLead()
	if err != nil {
		return fmt.Errorf("broker: upstream: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("broker: upstream: %w", err)
	}
	deadline := time.Now().Add(UpstreamWait)
	for try := 1; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = js.AccountInfo(rctx)
		cancel()
		if err == nil {
			b.cfg.Logger.Info("broker: linked to the cluster", "urls", strings.Join(u.Hosts(), ","), "domain", u.Domain, "tries", try)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("broker: upstream: %w", ctx.Err())
		}
		if !retriable(err) || time.Now().After(deadline) {
			return b.upstreamErr(err)
		}
		// Not polling: this retries a request that failed. The leaf link
		// dials again every second by itself and nothing tells this
		// process when it is up, so the next try comes a moment later.
		t := time.NewTimer(upstreamRetryGap)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("broker: upstream: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// retriable says whether a JetStream request failed the way it does while
// the link or the cluster's leader is not there yet.
func retriable(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// upstreamErr says what to check when the cluster's JetStream did not answer.
func (b *Broker) upstreamErr(err error) error {
	u := b.cfg.Upstream
	hosts := strings.Join(u.Hosts(), ",")
	if !b.LinkUp() {
		return fmt.Errorf("broker: %w: the leaf link to %s did not come up within %s (%v): check that each URL is a leaf node port of the cluster (leafnodes { listen } in its configuration, 7422 by default, not the client port 4222) and that --creds is a user of the cluster", ErrUpstream, hosts, UpstreamWait, err)
	}
	return fmt.Errorf("broker: %w: linked to %s, but no JetStream answers in domain %q (%v): check the cluster's jetstream { domain } and that the credential's account has JetStream enabled", ErrUpstream, hosts, u.Domain, err)
}

// replicas is how many copies of the stream to ask for.
func (b *Broker) replicas() int {
	if b.cfg.Upstream != nil {
		return UpstreamReplicas
	}
	return 1
}

// streamErr explains a stream the cluster cannot place with its replicas.
func (b *Broker) streamErr(err error) error {
	var apiErr *jetstream.APIError
	if b.cfg.Upstream == nil || !errors.As(err, &apiErr) {
		return err
	}
	// The server's codes for: no peers to place on, insufficient
	// resources, replicas > 1 on a server that is not clustered.
	switch apiErr.ErrorCode {
	case 10005, 10023, 10074:
		return fmt.Errorf("%w: the stream %s needs %d replicas and the cluster cannot place them (%v): use a JetStream cluster of at least %d servers with room for the stream (%d MiB) in the account's limits", ErrReplicas, StreamName, UpstreamReplicas, err, UpstreamReplicas, StreamMaxBytes>>20)
	}
	return err
}

// Upstream is the external cluster the broker links to; nil for none.
func (b *Broker) Upstream() *Upstream { return b.cfg.Upstream }

// LinkUp says whether the leaf link to the external cluster is up now.
func (b *Broker) LinkUp() bool { return b.srv.NumLeafNodes() > 0 }
