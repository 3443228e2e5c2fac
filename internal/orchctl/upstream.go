package orchctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orch-dev/orch/broker"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/notify"
)

// ExternalView is what orch status and orch doctor say of an external
// cluster (orch serve --nats): its URLs, and whether the stream answers
// through the leaf link now.
type ExternalView struct {
	URLs []string `json:"urls"`
	// Link is "up" when the cluster's JetStream answered through the link,
	// "down" otherwise (Err says what went wrong).
	Link     string `json:"link"`
	Err      string `json:"error,omitempty"`
	Leader   string `json:"leader,omitempty"`   // the server leading the stream
	Replicas int    `json:"replicas,omitempty"` // copies of the stream, the leader's included
}

// probeTimeout bounds the stream info request of External.
const probeTimeout = 2 * time.Second

// External reports the external cluster of the lead loop running in root,
// nil when its broker keeps the stream itself (or none runs).
func External(ctx context.Context, root string) *ExternalView {
	od := orchdir.Of(root)
	ep, err := notify.ReadEndpoint(od)
	if err != nil || len(ep.Upstream) == 0 || ServePID(root) == 0 {
		return nil
	}
	v := &ExternalView{URLs: ep.Upstream, Link: "down"}
	cfg, err := notify.LeadConfig(od)
	if err != nil {
		v.Err = err.Error()
		return v
	}
	cfg.Timeout = probeTimeout
	nc, err := notify.Connect(cfg, "orch-status")
	if err != nil {
		v.Err = err.Error()
		return v
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		v.Err = err.Error()
		return v
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	s, err := js.Stream(ctx, broker.StreamName)
	if err != nil {
		v.Err = err.Error()
		return v
	}
	v.Link = "up"
	if c := s.CachedInfo().Cluster; c != nil {
		v.Leader, v.Replicas = c.Leader, 1+len(c.Replicas)
	}
	return v
}

// String is the one line orch status prints.
func (v *ExternalView) String() string {
	s := fmt.Sprintf("external cluster %s, link %s", strings.Join(v.URLs, ","), v.Link)
	if v.Link == "up" {
		return s + fmt.Sprintf(" (stream %s led by %s, %d replicas)", broker.StreamName, v.Leader, v.Replicas)
	}
	return s + ": " + v.Err
}

// externalCheck is orch doctor's line for an external cluster.
func externalCheck(ctx context.Context, root string) (Check, bool) {
	v := External(ctx, root)
	if v == nil {
		return Check{}, false
	}
	c := Check{Name: "external cluster", OK: v.Link == "up", Info: v.String()}
	if !c.OK {
		c.Fix = "check that the cluster's servers run and that orch serve's log shows the leaf link up; events are spooled meanwhile"
	}
	return c, true
}
