package task

import (
	"context"
	"errors"
	"testing"
)

func TestMemoryStorePush(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryStore(MemoryLimits{MaxPushPerTask: 2, MaxPushPerOwner: 3})
	owner := Owner{AgentID: "a", Tenant: "t"}
	for _, id := range []string{"t1", "t2"} {
		if err := m.Create(ctx, Record{Task: Task{ID: id, State: Running, Owner: owner}}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := m.SetPush(ctx, "t1", PushConfig{URL: "https://agents.bank.ae/cb", Token: "s"})
	if err != nil || p.ID == "" {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := m.SetPush(ctx, "t1", PushConfig{ID: "mine", URL: "https://agents.bank.ae/cb2"}); err != nil {
		t.Fatal(err)
	}
	// Replacing an existing id is not a new config.
	if _, err := m.SetPush(ctx, "t1", PushConfig{ID: "mine", URL: "https://agents.bank.ae/cb3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetPush(ctx, "t1", PushConfig{URL: "https://x"}); !errors.Is(err, ErrPushLimit) {
		t.Fatalf("per task: %v", err)
	}
	if _, err := m.SetPush(ctx, "t2", PushConfig{URL: "https://y"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetPush(ctx, "t2", PushConfig{URL: "https://z"}); !errors.Is(err, ErrPushLimit) {
		t.Fatalf("per owner: %v", err)
	}
	rec, _, _ := m.Get(ctx, "t1")
	if len(rec.Push) != 2 || rec.Push[1].URL != "https://agents.bank.ae/cb3" || rec.Push[0].Token != "s" {
		t.Fatalf("configs %+v", rec.Push)
	}
	rec.Push[0].URL = "mutated"
	if again, _, _ := m.Get(ctx, "t1"); again.Push[0].URL == "mutated" {
		t.Fatal("Get returned shared push configs")
	}
	if err := m.DeletePush(ctx, "t1", "nope"); !errors.Is(err, ErrPushNotFound) {
		t.Fatalf("unknown config: %v", err)
	}
	if err := m.DeletePush(ctx, "t1", "mine"); err != nil {
		t.Fatal(err)
	}
	// Deleting freed one of the owner's slots.
	if _, err := m.SetPush(ctx, "t2", PushConfig{URL: "https://z"}); err != nil {
		t.Fatalf("after delete: %v", err)
	}
	// Removing a task frees its configs' slots.
	if err := m.Delete(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	if m.ownerPush[ownerKey(owner)] != 1 {
		t.Fatalf("owner count %d, want 1", m.ownerPush[ownerKey(owner)])
	}
	if _, err := m.SetPush(ctx, "gone", PushConfig{URL: "https://z"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown task: %v", err)
	}
}
