package lead

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orch-dev/orch/board"
	"github.com/orch-dev/orch/internal/eventually"
	"github.com/orch-dev/orch/internal/orchctl"
	"github.com/orch-dev/orch/internal/orchdir"
	"github.com/orch-dev/orch/internal/state"
)

// A record far over the broker's payload limit (64 KiB) still reaches a
// board: orch watch's Follow, on the real broker, gets the whole of it.
func TestBoardFollowsABigRecord(t *testing.T) {
	const plans = 600
	root := startLoopWith(t, func(root string) {
		st := state.New()
		for i := 0; i < plans; i++ {
			n := fmt.Sprintf("big-%03d", i)
			st.Plans[n] = &state.Run{Name: n, State: state.PlanFailed, Reason: strings.Repeat("why ", 60), Updated: time.Now()}
		}
		if err := st.Save(orchdir.Of(root)); err != nil {
			t.Fatal(err)
		}
	})
	var mu sync.Mutex
	var got board.View
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- orchctl.Follow(ctx, root, func(v board.View) {
			mu.Lock()
			got = v
			mu.Unlock()
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	eventually.True(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got.Serving && len(got.Attention) >= plans
	}, "the board to show every failed plan of the running loop")
	if n := len(board.FrameOf(mustLoad(t, root), nil, time.Now()).Marshal()); n <= 64<<10 {
		t.Fatalf("frame is %d bytes: the test must exceed the broker's payload limit", n)
	}
}

func mustLoad(t *testing.T, root string) *state.State {
	t.Helper()
	st, err := state.Load(orchdir.Of(root))
	if err != nil {
		t.Fatal(err)
	}
	return st
}
