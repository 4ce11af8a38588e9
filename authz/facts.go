package authz

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
)

// withFacts is the policy's data document with the configuration's facts
// (LoadOptions.Facts) merged over it: objects are merged key by key, lists
// are joined (an item already listed is not repeated), and anything else in
// the facts replaces what the data files say. Neither input is changed.
func withFacts(docs, facts map[string]any) map[string]any {
	out := make(map[string]any, len(docs)+len(facts))
	for k, v := range docs {
		out[k] = v
	}
	for k, f := range facts {
		out[k] = mergeValue(out[k], f)
	}
	return out
}

func mergeValue(d, f any) any {
	switch fv := f.(type) {
	case map[string]any:
		if dv, ok := d.(map[string]any); ok {
			return withFacts(dv, fv)
		}
	case []any:
		if dv, ok := d.([]any); ok {
			out := append([]any(nil), dv...)
			for _, item := range fv {
				if !containsValue(out, item) {
					out = append(out, item)
				}
			}
			return out
		}
	}
	return f
}

func containsValue(list []any, v any) bool {
	for _, item := range list {
		if reflect.DeepEqual(item, v) {
			return true
		}
	}
	return false
}

// withDigest is a revision that also names the facts' digest.
func withDigest(revision, digest string) string {
	sum := sha256.Sum256([]byte(revision + "\x00" + digest))
	return hex.EncodeToString(sum[:8])
}

// factsDigest names the facts in the policy's revision: the same files with
// other facts are another revision.
func factsDigest(facts map[string]any) (string, error) {
	raw, err := json.Marshal(facts) // map keys are sorted
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8]), nil
}
