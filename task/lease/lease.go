// Package lease is the rhythm every holder of durable work keeps over a
// task.WorkQueue (the core's followers, the push deliverer's notifications):
// at once and then every third of the lease, it renews the leases it holds
// and claims the items nobody holds, each queue call bounded in time.
package lease

import (
	"context"
	"time"

	"github.com/writ-authz/writ/task"
)

// Timeout bounds one work-queue call.
const Timeout = 5 * time.Second

// Loop runs cycle at once and then every third of lease (at least every
// 10ms) until ctx ends: a lease survives a missed renewal or two.
func Loop(ctx context.Context, lease time.Duration, cycle func()) {
	every := max(lease/3, 10*time.Millisecond)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cycle()
		t.Reset(every)
	}
}

// Renew extends holder's leases on ids (items of kind in q) by lease, within
// Timeout, and returns the ids it no longer holds. No ids: nothing to renew.
// An error once ctx has ended is not returned: the holder is closing, and
// what it held is claimed by others once the leases run out.
func Renew(ctx context.Context, q task.WorkQueue, kind, holder string, ids []string, lease time.Duration) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	lost, err := q.Renew(rctx, kind, holder, ids, lease)
	if err != nil && ctx.Err() != nil {
		return nil, nil
	}
	return lost, err
}
