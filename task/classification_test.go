package task_test

import (
	"strings"
	"testing"

	"github.com/writ-authz/writ/task"
)

func TestLevelRank(t *testing.T) {
	tests := []struct {
		l    task.Level
		want int
	}{
		{"public", 0},
		{"internal", 1},
		{"confidential", 2},
		{"restricted", 3},
		{"", -1},
		{"secret", -1},
		{"Public", -1},
		{" public", -1},
	}
	for _, tt := range tests {
		if got := tt.l.Rank(); got != tt.want {
			t.Errorf("Level(%q).Rank() = %d, want %d", tt.l, got, tt.want)
		}
	}
	order := []task.Level{task.Public, task.Internal, task.Confidential, task.Restricted}
	for i := 1; i < len(order); i++ {
		if order[i-1].Rank() >= order[i].Rank() {
			t.Errorf("%s (rank %d) is not below %s (rank %d)", order[i-1], order[i-1].Rank(), order[i], order[i].Rank())
		}
	}
	if len(task.Levels) != 4 {
		t.Fatalf("Levels = %v, want 4 levels", task.Levels)
	}
	for i, l := range order {
		if task.Levels[i] != l {
			t.Errorf("Levels[%d] = %q, want %q", i, task.Levels[i], l)
		}
	}
}

func TestParseLevel(t *testing.T) {
	for _, name := range []string{"public", "internal", "confidential", "restricted"} {
		l, err := task.ParseLevel(name)
		if err != nil {
			t.Errorf("ParseLevel(%q): %v", name, err)
		}
		if string(l) != name {
			t.Errorf("ParseLevel(%q) = %q", name, l)
		}
	}
	for _, name := range []string{"", "secret", "RESTRICTED", "restricted ", "top-secret", "public,internal"} {
		l, err := task.ParseLevel(name)
		if err == nil {
			t.Errorf("ParseLevel(%q) = %q, nil; want an error", name, l)
			continue
		}
		if l != "" {
			t.Errorf("ParseLevel(%q) returned level %q with its error", name, l)
		}
		msg := err.Error()
		if !strings.Contains(msg, `"`+name+`"`) {
			t.Errorf("ParseLevel(%q) error %q does not quote the name", name, msg)
		}
		if !strings.Contains(msg, "known: public, internal, confidential, restricted") {
			t.Errorf("ParseLevel(%q) error %q does not list the known levels", name, msg)
		}
	}
}

func TestMax(t *testing.T) {
	tests := []struct{ a, b, want task.Level }{
		{"", "", ""},
		{"", task.Public, task.Public},
		{task.Public, "", task.Public},
		{"", task.Restricted, task.Restricted},
		{task.Restricted, "", task.Restricted},
		{task.Public, task.Internal, task.Internal},
		{task.Internal, task.Public, task.Internal},
		{task.Confidential, task.Internal, task.Confidential},
		{task.Internal, task.Confidential, task.Confidential},
		{task.Confidential, task.Restricted, task.Restricted},
		{task.Restricted, task.Public, task.Restricted},
		{task.Confidential, task.Confidential, task.Confidential},
		{"bogus", task.Public, task.Public}, // an unknown level counts as lowest
	}
	for _, tt := range tests {
		if got := task.Max(tt.a, tt.b); got != tt.want {
			t.Errorf("Max(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}
