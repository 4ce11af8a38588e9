package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShadowKeys: policies_shadow resolves against the file's directory as
// policies does; shadow_queue defaults to DefaultShadowQueue and is refused
// outside 1..MaxShadowQueue (0 is the default) with its key named.
func TestShadowKeys(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.PoliciesShadow) != 0 || c.ShadowQueueSize() != DefaultShadowQueue {
		t.Fatalf("defaults: %v %d", c.PoliciesShadow, c.ShadowQueueSize())
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "writ.yaml")
	if err := os.WriteFile(path, []byte(good+"policies_shadow: [candidate]\nshadow_queue: 16\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.PoliciesShadow) != 1 || c.PoliciesShadow[0] != filepath.Join(dir, "candidate") || c.ShadowQueueSize() != 16 {
		t.Fatalf("loaded: %v %d", c.PoliciesShadow, c.ShadowQueueSize())
	}
	for _, bad := range []string{"shadow_queue: -1\n", "shadow_queue: 65537\n", "policies_shadow: ['  ']\n"} {
		if _, err := Parse([]byte(good + bad)); err == nil || !strings.Contains(err.Error(), strings.SplitN(bad, ":", 2)[0]) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
