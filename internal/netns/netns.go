// Package netns gives end-to-end tests "hosts" on one machine: each host is
// a Linux network namespace with its own processes, joined to the root
// namespace (where the test and the lead run) by a veth pair. A host
// reaches every address of the root namespace through its default route,
// so the lead listens on RootAddr, a /32 on the root's loopback that no
// host's LinkDown touches. Another host's Gateway is reachable too, but
// whether it stays so while that host's link is down depends on the kernel
// (6.x keeps the local route of an address on a downed link, older ones
// drop it). Hosts cannot reach each other's Addr: the root namespace does
// not forward, and nothing here turns forwarding on.
//
// Addresses come from 10.213.0.0/16: hosts take a /30 each from the lower
// half (the root side is Gateway, the namespace side Addr), RootAddr a /32
// from the upper half. The name of the root-side interface, orchts<slot>,
// is the lock on a /30: creating it fails if another test, in this process
// or another, holds the slot.
//
// It needs root and iproute2 (ip); Require skips a test without them, or
// fails it when ORCH_REQUIRE_NETNS=1. Everything it makes is named orchts*:
// `ip netns list | grep orchts`, `ip -o link | grep orchts` and
// `ip -o addr show dev lo | grep orchts` list it. A test's cleanup removes
// what it made; what a killed run left behind is removed by the next run's
// first New or RootAddr, which deletes namespaces and loopback addresses
// whose creating process (its pid is in the name, the link's alias or the
// address label) is gone. One kind of leftover can stay: the blackhole
// route of a host killed while its link was down, when its namespace had
// gone by itself before the reaping. It is harmless (the connected route of
// the next host in that slot takes precedence) and listed by
// `ip route show type blackhole | grep 10.213`.
package netns

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/runner"
)

const (
	prefix = "orchts"
	// hostSlots is how many /30 blocks the lower half of 10.213.0.0/16
	// holds; rootSlots how many /32 the upper half does.
	hostSlots = 1 << 13
	rootSlots = 1 << 15
	// blackholeMetric marks the route LinkDown adds; any metric above the
	// kernel's 0 for the connected route would do.
	blackholeMetric = "4213"
)

// Host is one network namespace with a link to the root namespace.
type Host struct {
	Name      string // as given to New
	Namespace string // the namespace, for `ip netns exec` by hand
	Addr      string // the host's own address, on its eth0
	Gateway   string // the root side's address, the host's default route

	link string // the root side of the veth pair
	net  string // the /30, for the blackhole route

	mu   sync.Mutex
	down bool
}

var seq atomic.Int64

// nameRe is what New accepts as a host name: it ends the namespace's name.
var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// Available says whether namespaces can be made here and, when not, why.
// It is checked once per process.
func Available() (bool, string) { return available() }

var available = sync.OnceValues(func() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return false, "ip (iproute2) is not on PATH"
	}
	ns := fmt.Sprintf("%s-%d-probe", prefix, os.Getpid())
	if _, err := ip("netns", "add", ns); err != nil {
		return false, fmt.Sprintf("cannot make a network namespace: %v", err)
	}
	defer ip("netns", "del", ns)
	link := fmt.Sprintf("%sp%06x", prefix, os.Getpid())
	if _, err := ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
		return false, fmt.Sprintf("cannot make a veth pair: %v", err)
	}
	ip("link", "del", link)
	return true, ""
})

// Require skips t when namespaces cannot be made here, or fails it when
// the environment asks for every namespace test (ORCH_REQUIRE_NETNS=1, as
// CI does).
func Require(t testing.TB) {
	t.Helper()
	ok, why := Available()
	if ok {
		return
	}
	if os.Getenv("ORCH_REQUIRE_NETNS") == "1" {
		t.Fatalf("%s, and ORCH_REQUIRE_NETNS=1: run the tests as root with iproute2 installed", why)
	}
	t.Skip(why)
}

// New makes a host called name (letters, digits, - and _) for the length of
// t: a namespace with lo up and an eth0 holding Addr/30, whose default
// route goes to Gateway/30 on the root side. t's cleanup kills every
// process left in the namespace and deletes it and its link.
func New(t testing.TB, name string) *Host {
	t.Helper()
	Require(t)
	if !nameRe.MatchString(name) {
		t.Fatalf("netns: host name %q: want letters, digits, - and _, at most 32", name)
	}
	reapOnce(t)
	start := time.Now()
	h := &Host{Name: name, Namespace: fmt.Sprintf("%s-%d-%d-%s", prefix, os.Getpid(), seq.Add(1), name)}
	if _, err := ip("netns", "add", h.Namespace); err != nil {
		t.Fatalf("netns: host %s: %v", name, err)
	}
	t.Cleanup(func() { h.remove(t) })

	slot, err := claimSlot(h.Namespace)
	if err != nil {
		t.Fatalf("netns: host %s: %v", name, err)
	}
	h.link = fmt.Sprintf("%s%04x", prefix, slot)
	h.net = addr(4*slot).String() + "/30"
	h.Gateway = addr(4*slot + 1).String()
	h.Addr = addr(4*slot + 2).String()
	for _, args := range [][]string{
		{"link", "set", "dev", h.link, "alias", h.Namespace},
		{"addr", "add", h.Gateway + "/30", "dev", h.link},
		{"link", "set", "dev", h.link, "up"},
		{"-n", h.Namespace, "addr", "add", h.Addr + "/30", "dev", "eth0"},
		{"-n", h.Namespace, "link", "set", "dev", "eth0", "up"},
		{"-n", h.Namespace, "link", "set", "dev", "lo", "up"},
		{"-n", h.Namespace, "route", "add", "default", "via", h.Gateway},
	} {
		if _, err := ip(args...); err != nil {
			t.Fatalf("netns: host %s: %v", name, err)
		}
	}
	t.Logf("netns: host %s is %s, %s via %s on %s (made in %s)", name, h.Namespace, h.Addr, h.Gateway, h.link, time.Since(start).Round(time.Millisecond))
	return h
}

// claimSlot creates the veth pair of a free /30, its root side named after
// the slot and its other side eth0 in ns, and returns the slot. It starts
// at a random slot so that parallel tests seldom race for the same one.
func claimSlot(ns string) (int, error) {
	used, err := usedAddrs()
	if err != nil {
		return 0, err
	}
	links, err := linkNames()
	if err != nil {
		return 0, err
	}
	first := rand.IntN(hostSlots)
	for i := range hostSlots {
		slot := (first + i) % hostSlots
		link := fmt.Sprintf("%s%04x", prefix, slot)
		if links[link] || used[addr(4*slot)] || used[addr(4*slot+1)] || used[addr(4*slot+2)] || used[addr(4*slot+3)] {
			continue
		}
		_, err := ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
		if taken(err) {
			continue
		}
		return slot, err
	}
	return 0, ErrNoAddress
}

// remove kills what runs in the namespace, then deletes the link and the
// namespace (deferred, so that they go even when a process will not die).
// Deleting the link alone would free the slot, but a namespace whose
// processes live on keeps its veth pair alive.
func (h *Host) remove(t testing.TB) {
	defer func() {
		if _, err := ip("netns", "del", h.Namespace); err != nil {
			t.Errorf("netns: remove host %s: %v", h.Name, err)
		}
	}()
	defer func() {
		if h.link == "" {
			return
		}
		if _, err := ip("link", "del", h.link); err != nil {
			t.Errorf("netns: remove host %s: %v", h.Name, err)
		}
	}()
	defer func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.down {
			return
		}
		if _, err := ip("route", "del", "blackhole", h.net, "metric", blackholeMetric); err != nil {
			t.Errorf("netns: remove host %s: %v", h.Name, err)
		}
	}()
	if err := killAll(t, h.Namespace); err != nil {
		t.Errorf("netns: remove host %s: %v", h.Name, err)
	}
}

// killAll sends SIGKILL to every process in ns until none is left. A killed
// child of the test that nobody waits for stays a zombie, which has left
// the namespace already and is not listed.
func killAll(t testing.TB, ns string) error {
	var err error
	eventually.True(t, 5*time.Second, func() bool {
		var pids []int
		pids, err = nsPids(ns)
		if err != nil {
			return true
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(pids) == 0
	}, "processes in %s still alive after SIGKILL", ns)
	return err
}

// nsPids lists the processes in ns.
func nsPids(ns string) ([]int, error) {
	out, err := ip("netns", "pids", ns)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Command returns a command that runs name with args inside the host's
// namespace, through `ip netns exec`, which execs name in place: cmd's
// process is the program itself, so ctx and cmd.Process reach it. name is
// looked up on the test's PATH. cmd.Env starts empty, not nil: the program
// inherits nothing; append what it needs, or set os.Environ() to inherit.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	path, lookErr := name, error(nil)
	if !strings.Contains(name, "/") {
		path, lookErr = exec.LookPath(name)
	}
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Namespace, path}, args...)...)
	cmd.Env = []string{}
	if lookErr != nil {
		cmd.Err = lookErr
	}
	return cmd
}

// LinkDown cuts the host's link as a pulled cable would: packets either way
// are dropped without a word, so connections stall (no RST, no ICMP) and
// new ones time out, until LinkUp. The root side is set down; a blackhole
// route keeps the root's packets for the host from leaving by the default
// route meanwhile (a connect from the root namespace fails at once with
// EINVAL instead).
func (h *Host) LinkDown(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := ip("route", "replace", "blackhole", h.net, "metric", blackholeMetric); err != nil {
		t.Fatalf("netns: link down %s: %v", h.Name, err)
	}
	h.down = true
	if _, err := ip("link", "set", "dev", h.link, "down"); err != nil {
		t.Fatalf("netns: link down %s: %v", h.Name, err)
	}
}

// LinkUp restores the link LinkDown cut; stalled connections resume with
// their next retransmission.
func (h *Host) LinkUp(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := ip("link", "set", "dev", h.link, "up"); err != nil {
		t.Fatalf("netns: link up %s: %v", h.Name, err)
	}
	if h.down {
		if _, err := ip("route", "del", "blackhole", h.net, "metric", blackholeMetric); err != nil {
			t.Fatalf("netns: link up %s: %v", h.Name, err)
		}
		h.down = false
	}
}

// RootAddr adds an address of the root namespace that every host reaches
// through its default route, whatever other hosts' links do: a /32 on the
// root's loopback, labelled with the test process's pid. t's cleanup
// removes it.
func RootAddr(t testing.TB) string {
	t.Helper()
	Require(t)
	reapOnce(t)
	used, err := usedAddrs()
	if err != nil {
		t.Fatalf("netns: root address: %v", err)
	}
	label := rootLabel(os.Getpid())
	first := 1 + rand.IntN(rootSlots-2)
	for i := range rootSlots - 2 {
		a := addr(rootSlots + 1 + (first+i)%(rootSlots-2))
		if used[a] {
			continue
		}
		_, err := ip("addr", "add", a.String()+"/32", "dev", "lo", "label", label)
		if taken(err) {
			continue
		}
		if err != nil {
			t.Fatalf("netns: root address: %v", err)
		}
		t.Cleanup(func() {
			if _, err := ip("addr", "del", a.String()+"/32", "dev", "lo"); err != nil {
				t.Errorf("netns: remove root address: %v", err)
			}
		})
		return a.String()
	}
	t.Fatalf("netns: root address: %v", ErrNoAddress)
	return ""
}

// rootLabel is the label of RootAddr's addresses: "lo:" for the device,
// then the pid in hex, which fits the label's 15 bytes up to pid_max's
// ceiling of 2^22.
func rootLabel(pid int) string { return fmt.Sprintf("lo:%s%06x", prefix, pid) }

// addr is the i-th address of 10.213.0.0/16.
func addr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 213, byte(i >> 8), byte(i)})
}

// ip runs iproute2's ip with args and returns its output.
func ip(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := runner.OS{}.Run(ctx, runner.Cmd{Name: "ip", Args: args})
	return string(out), err
}

// taken says whether err is ip refusing to make a link or an address that
// exists already: someone else has the slot.
func taken(err error) bool {
	var re *runner.Error
	return errors.As(err, &re) && (strings.Contains(re.Stderr, "File exists") || strings.Contains(re.Stderr, "already assigned"))
}

// usedAddrs lists the IPv4 addresses of the root namespace.
func usedAddrs() (map[netip.Addr]bool, error) {
	out, err := ip("-o", "-4", "addr", "show")
	if err != nil {
		return nil, err
	}
	used := map[netip.Addr]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != "inet" {
			continue
		}
		if p, err := netip.ParsePrefix(f[3]); err == nil {
			used[p.Addr()] = true
		}
	}
	return used, nil
}

// linkNames lists the interfaces of the root namespace.
func linkNames() (map[string]bool, error) {
	out, err := ip("-o", "link", "show")
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		names[name] = true
	}
	return names, nil
}
