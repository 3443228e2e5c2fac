// Package hosts is the lead's register of the other machines that run its
// workers: each host's name, its NATS identity (an NKey whose seed only the
// host keeps) and the worker ids that are its own. orch hosts add writes an
// entry and the one-time join token; orch hosts remove deletes it, and the
// lead loop revokes the host's link. Nothing here runs a server.
//
// An entry is .orch/hosts/<name>.json, mode 0600, holding no secret: the
// lead needs only the host's public key to let its leaf link in.
package hosts

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/orch-dev/orch/event"
	"github.com/orch-dev/orch/internal/atomicfile"
	"github.com/orch-dev/orch/internal/orchdir"
)

// Dir is the folder under .orch/ that holds the entries.
const Dir = orchdir.Hosts

// MaxWorkers bounds the workers one host is given at once.
const MaxWorkers = 64

// namePattern is a host name: one NATS subject token, a JetStream domain
// and a stream name alike (no dots, no wildcards, no spaces).
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)

// ValidateName says why name cannot be a host's, nil when it can.
func ValidateName(name string) error {
	if !namePattern.MatchString(name) || strings.HasSuffix(name, "-") {
		return fmt.Errorf("%w %q: use a lowercase letter, then up to 30 lowercase letters, digits or dashes (e.g. build-2)", ErrName, name)
	}
	if name == "lead" {
		return fmt.Errorf("%w %q: lead is the lead's own machine", ErrName, name)
	}
	return nil
}

// Host is one registered machine.
type Host struct {
	Name string `json:"name"`
	// Key is the public NKey its leaf link authenticates with.
	Key string `json:"key"`
	// Workers are the worker ids that run there, and only there.
	Workers []string  `json:"workers"`
	Added   time.Time `json:"added"`
}

// Owns says whether worker id is one of h's.
func (h Host) Owns(id string) bool { return slices.Contains(h.Workers, id) }

// List reads every entry under the .orch directory dir, by name; none is
// an empty list. An entry that does not parse, or whose name is not its
// file's, is an error naming the file (never skipped: a host it would
// have revoked must not slip back in).
func List(dir string) ([]Host, error) {
	ents, err := os.ReadDir(filepath.Join(dir, Dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hosts: %w", err)
	}
	var out []Host
	for _, de := range ents {
		name, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || strings.HasPrefix(name, ".") {
			continue
		}
		h, err := read(dir, name)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

func path(dir, name string) string { return filepath.Join(dir, Dir, name+".json") }

func read(dir, name string) (Host, error) {
	var h Host
	p := path(dir, name)
	if err := ValidateName(name); err != nil {
		return h, fmt.Errorf("hosts: %s: %w (remove the file)", p, err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return h, fmt.Errorf("hosts: %w", err)
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return h, fmt.Errorf("hosts: %s: %w (orch hosts remove %s, then add it again)", p, err, name)
	}
	if h.Name != name {
		return h, fmt.Errorf("hosts: %s names host %q, not %q (orch hosts remove %s)", p, h.Name, name, name)
	}
	if !nkeys.IsValidPublicUserKey(h.Key) {
		return h, fmt.Errorf("hosts: %s: key %q is not a public user NKey (orch hosts remove %s, then add it again)", p, h.Key, name)
	}
	for _, w := range h.Workers {
		if !event.ValidWorker(w) {
			return h, fmt.Errorf("hosts: %s: %w %q (orch hosts remove %s, then add it again)", p, ErrWorker, w, name)
		}
	}
	return h, nil
}

// Add registers host name with n new worker ids (the lowest not taken by
// taken or another host) and returns its entry and its join token. The
// token carries the host's seed: it is shown once and kept nowhere here.
func Add(dir, name string, n int, taken []string, prefix string) (Host, string, error) {
	if err := ValidateName(name); err != nil {
		return Host{}, "", err
	}
	if n < 1 || n > MaxWorkers {
		return Host{}, "", fmt.Errorf("%w: %d workers: give 1 to %d", ErrWorker, n, MaxWorkers)
	}
	all, err := List(dir)
	if err != nil {
		return Host{}, "", err
	}
	used := map[string]bool{}
	for _, id := range taken {
		used[id] = true
	}
	for _, h := range all {
		if h.Name == name {
			return Host{}, "", fmt.Errorf("%w: %s (orch hosts remove %s first to give it a new key)", ErrExists, name, name)
		}
		for _, w := range h.Workers {
			used[w] = true
		}
	}
	var workers []string
	for i := 1; len(workers) < n; i++ {
		id := "w" + strconv.Itoa(i)
		if !event.ValidWorker(id) {
			return Host{}, "", fmt.Errorf("%w: no free worker id left", ErrWorker)
		}
		if !used[id] {
			workers = append(workers, id)
		}
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return Host{}, "", fmt.Errorf("hosts: %w", err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	h := Host{Name: name, Key: pub, Workers: workers, Added: time.Now().UTC().Truncate(time.Second)}
	if err := os.MkdirAll(filepath.Join(dir, Dir), 0o700); err != nil {
		return Host{}, "", fmt.Errorf("hosts: %w", err)
	}
	data, _ := json.MarshalIndent(h, "", "  ")
	if err := atomicfile.Write(path(dir, name), append(data, '\n'), 0o600); err != nil {
		return Host{}, "", fmt.Errorf("hosts: %w", err)
	}
	tok := Token{Host: name, Seed: string(seed), Workers: workers, Prefix: prefix}
	return h, tok.String(), nil
}

// Remove deletes host name's entry.
func Remove(dir, name string) (Host, error) {
	if err := ValidateName(name); err != nil {
		return Host{}, err
	}
	h, err := read(dir, name)
	if errors.Is(err, os.ErrNotExist) {
		return Host{}, fmt.Errorf("%w: %s (orch hosts lists them)", ErrUnknown, name)
	}
	if err != nil {
		// A broken entry is removed all the same: that is the fix named.
		h = Host{Name: name}
	}
	if err := os.Remove(path(dir, name)); err != nil {
		return Host{}, fmt.Errorf("hosts: %w", err)
	}
	return h, nil
}

// Owner is the host that owns worker id among hs, "" for the lead's own.
func Owner(hs []Host, id string) string {
	for _, h := range hs {
		if h.Owns(id) {
			return h.Name
		}
	}
	return ""
}

// Workers are every host's worker ids.
func Workers(hs []Host) []string {
	ids := map[string]bool{}
	for _, h := range hs {
		for _, w := range h.Workers {
			ids[w] = true
		}
	}
	return slices.Sorted(maps.Keys(ids))
}

// prefixPattern is a subject prefix orch uses: one token.
var prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,15}$`)

// tokenPrefix starts every join token, with its format's version.
const tokenPrefix = "orchhost1."

// Token is what a host needs to join: its name, its seed, its workers,
// the lead's subject prefix. Its String is a secret.
type Token struct {
	Host    string   `json:"host"`
	Seed    string   `json:"seed"`
	Workers []string `json:"workers"`
	Prefix  string   `json:"prefix"`
}

func (t Token) String() string {
	data, _ := json.Marshal(t)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(data)
}

// ParseToken reads a token orch hosts add printed, checking every field.
func ParseToken(s string) (Token, error) {
	var t Token
	body, ok := strings.CutPrefix(strings.TrimSpace(s), tokenPrefix)
	if !ok {
		return t, fmt.Errorf("%w: it does not start with %s (copy the whole line orch hosts add printed)", ErrToken, tokenPrefix)
	}
	data, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return t, fmt.Errorf("%w: cut short or changed (copy the whole line orch hosts add printed)", ErrToken)
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return t, fmt.Errorf("%w: cut short or changed (copy the whole line orch hosts add printed)", ErrToken)
	}
	if err := ValidateName(t.Host); err != nil {
		return t, fmt.Errorf("%w: %v", ErrToken, err)
	}
	if _, err := nkeys.FromSeed([]byte(t.Seed)); err != nil || !strings.HasPrefix(t.Seed, "SU") {
		return t, fmt.Errorf("%w: its key is not a user NKey seed", ErrToken)
	}
	if len(t.Workers) == 0 || len(t.Workers) > MaxWorkers {
		return t, fmt.Errorf("%w: it names %d workers", ErrToken, len(t.Workers))
	}
	for _, w := range t.Workers {
		if !event.ValidWorker(w) {
			return t, fmt.Errorf("%w: %w %q", ErrToken, ErrWorker, w)
		}
	}
	if !prefixPattern.MatchString(t.Prefix) {
		return t, fmt.Errorf("%w: subject prefix %q", ErrToken, t.Prefix)
	}
	return t, nil
}

// Taken are the worker ids the lead's .orch directory dir uses itself:
// those with a key of their own under creds/workers.
func Taken(dir string) []string {
	var ids []string
	ents, _ := os.ReadDir(filepath.Join(dir, orchdir.Creds, orchdir.WorkerKeys))
	for _, de := range ents {
		if id, ok := strings.CutSuffix(de.Name(), ".nk"); ok && event.ValidWorker(id) {
			ids = append(ids, id)
		}
	}
	return ids
}
