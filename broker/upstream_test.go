package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

func TestParseUpstream(t *testing.T) {
	dir := t.TempDir()
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	seedFile := write("seed.nk", append(seed, '\n'), 0o600)
	open := write("open.nk", seed, 0o644)
	junk := write("junk", []byte("not a key\n"), 0o600)
	// The layout nsc writes (the JWT is not checked here: the cluster does).
	jwtFile := write("orch.creds", []byte("-----BEGIN NATS USER JWT-----\neyJhbGciOiJlZDI1NTE5In0.e30.sig\n------END NATS USER JWT------\n\n"+
		"-----BEGIN USER NKEY SEED-----\n"+string(seed)+"\n------END USER NKEY SEED------\n"), 0o600)
	for _, tc := range []struct {
		name, urls, domain, creds string
		want                      error // nil: accepted
		nkey, jwt                 bool
	}{
		{name: "jwt creds", urls: "nats://a:7422", domain: "hub", creds: jwtFile, jwt: true},
		{name: "two urls, seed", urls: "nats://127.0.0.1:7422, nats://10.0.0.2:7422", domain: "hub", creds: seedFile, nkey: true},
		{name: "no creds", urls: "nats://a:7422", domain: "hub"},
		{name: "http url", urls: "http://a:7422", domain: "hub", want: ErrUpstreamConfig},
		{name: "tls url", urls: "tls://a:7422", domain: "hub", want: ErrUpstreamConfig},
		{name: "no port", urls: "nats://a", domain: "hub", want: ErrUpstreamConfig},
		{name: "no url", urls: " , ", domain: "hub", want: ErrUpstreamConfig},
		{name: "no domain", urls: "nats://a:7422", want: ErrUpstreamConfig},
		{name: "creds readable by others", urls: "nats://a:7422", domain: "hub", creds: open, want: ErrCredsMode},
		{name: "creds not a key", urls: "nats://a:7422", domain: "hub", creds: junk, want: ErrUpstreamConfig},
		{name: "creds missing", urls: "nats://a:7422", domain: "hub", creds: filepath.Join(dir, "none"), want: ErrUpstreamConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ParseUpstream(tc.urls, tc.domain, tc.creds)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err != nil {
				if strings.Contains(err.Error(), string(seed)) {
					t.Errorf("error shows the seed: %v", err)
				}
				return
			}
			r, err := u.remote()
			if err != nil {
				t.Fatal(err)
			}
			if (r.Nkey != "") != tc.nkey || (r.Credentials != "") != tc.jwt {
				t.Errorf("remote: nkey set %v, credentials %q", r.Nkey != "", r.Credentials)
			}
		})
	}
	// A password in the URL is refused, and never quoted back.
	if _, err := ParseUpstream("nats://user:secret@a:7422", "hub", ""); err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "--creds") {
		t.Errorf("a URL with a password: %v", err)
	}
	if _, err := ParseUpstream("nats://u:p%zz@h:7422", "hub", ""); err == nil || strings.Contains(err.Error(), "p%zz") {
		t.Errorf("a URL that does not parse: %v", err)
	}
	u, _ := ParseUpstream("nats://a:7422", "hub", "")
	if got := strings.Join(u.Hosts(), ","); got != "nats://a:7422" {
		t.Errorf("Hosts = %q", got)
	}
}

// A cluster of one server cannot keep three copies: Start says so and
// what to do, after the link came up and JetStream answered through it.
func TestUpstreamWithoutRoomForReplicas(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	hubDir := t.TempDir()
	conf := filepath.Join(hubDir, "hub.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf(`listen: 127.0.0.1:-1
jetstream { store_dir: %q, domain: hub }
leafnodes { listen: 127.0.0.1:-1 }
accounts { ORCH: { jetstream: enabled, users: [ { nkey: %s } ] } }
`, filepath.Join(hubDir, "js"), pub)), 0o600)
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoSigs = true
	hub, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	hub.Start()
	t.Cleanup(hub.Shutdown)
	if !hub.ReadyForConnections(5 * time.Second) {
		t.Fatal("hub not ready")
	}
	creds := filepath.Join(t.TempDir(), "orch.nk")
	os.WriteFile(creds, seed, 0o600)
	u, err := ParseUpstream(fmt.Sprintf("nats://127.0.0.1:%d", opts.LeafNode.Port), "hub", creds)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), ".orch")
	os.MkdirAll(dir, 0o700)
	b, err := Start(context.Background(), Config{Dir: dir, Workers: []string{"w1"}, Upstream: u})
	if err == nil {
		b.Shutdown()
		t.Fatal("Start made a stream of 3 replicas on one server")
	}
	if !errors.Is(err, ErrReplicas) || !strings.Contains(err.Error(), "at least 3 servers") {
		t.Fatalf("err = %v, want ErrReplicas naming the fix", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err == nil {
		t.Error("a leaf broker made a JetStream store of its own")
	}
}
