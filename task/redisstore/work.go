package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/writ-authz/writ/task"
)

// The work queue keeps, per kind, a hash of payloads, a hash of holders and a
// sorted set of lease ends (server clock). Claim takes the items whose lease
// ran out first (ties by id); an item whose lease ran out stays its holder's
// until another holder claims it.

func ttlMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// Put implements task.WorkQueue. An existing item gets the new payload and is
// leased to holder for ttl (ttl <= 0: claimable at once).
func (s *Store) Put(ctx context.Context, w task.Work, holder string, ttl time.Duration) error {
	n, err := workPutScript.Run(ctx, s.rdb, nil, s.prefix, w.Kind, w.ID, string(w.Payload), holder, ttlMS(ttl), s.work.MaxItems).Int()
	if err != nil {
		return unavailable(err)
	}
	if n == 0 {
		return fmt.Errorf("%w (%d items of kind %q)", task.ErrWorkFull, s.work.MaxItems, w.Kind)
	}
	return nil
}

// Claim implements task.WorkQueue.
func (s *Store) Claim(ctx context.Context, kind, holder string, n int, ttl time.Duration) ([]task.Work, error) {
	if n <= 0 {
		return nil, nil
	}
	res, err := s.run(ctx, workClaimScript, kind, holder, n, ttlMS(ttl))
	if err != nil {
		return nil, err
	}
	if len(res) < 1 {
		return nil, unavailable(fmt.Errorf("unexpected reply %v", res))
	}
	lease, err := micros(res[0])
	if err != nil {
		return nil, unavailable(err)
	}
	var out []task.Work
	for i := 1; i+2 <= len(res); i += 2 {
		out = append(out, task.Work{Kind: kind, ID: str(res[i]), Payload: []byte(str(res[i+1])), Holder: holder, LeaseUntil: lease})
	}
	return out, nil
}

// Renew implements task.WorkQueue.
func (s *Store) Renew(ctx context.Context, kind, holder string, ids []string, ttl time.Duration) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := []any{kind, holder, ttlMS(ttl)}
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := s.run(ctx, workRenewScript, args...)
	if err != nil {
		return nil, err
	}
	var lost []string
	for _, v := range res {
		lost = append(lost, str(v))
	}
	return lost, nil
}

// Done implements task.WorkQueue.
func (s *Store) Done(ctx context.Context, kind, id, holder string) error {
	n, err := workDoneScript.Run(ctx, s.rdb, nil, s.prefix, kind, id, holder).Int()
	if err != nil {
		return unavailable(err)
	}
	if n == 0 {
		return fmt.Errorf("%s %q: %w", kind, id, task.ErrNotHolder)
	}
	return nil
}

// Count implements task.WorkQueue.
func (s *Store) Count(ctx context.Context, kind string) (int, error) {
	n, err := s.rdb.HLen(ctx, s.prefix+"wp:"+kind).Result()
	if err != nil {
		return 0, unavailable(err)
	}
	return int(n), nil
}
