package wire

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/writ-authz/writ/task"
)

// ClassificationKey is the metadata key under which a caller declares its data's
// classification, A2A-extension style: {"urn:writ:ext:classification:v1":
// {"level": "restricted"}}.
const ClassificationKey = "urn:writ:ext:classification:v1"

// ClassificationHeader declares a classification for the whole request.
const ClassificationHeader = "Writ-Data-Classification"

// Declared returns the highest classification declared in the header and in any of
// the metadata maps (nil maps are skipped). An unknown level, or a declaration of
// the wrong shape, is an error: a caller that mislabels its data must not be treated
// as having declared nothing.
func Declared(h http.Header, metadata ...map[string]any) (task.Level, error) {
	var top task.Level
	for _, v := range h.Values(ClassificationHeader) {
		for name := range strings.SplitSeq(v, ",") {
			l, err := task.ParseLevel(strings.TrimSpace(name))
			if err != nil {
				return "", fmt.Errorf("header %s: %w", ClassificationHeader, err)
			}
			top = task.Max(top, l)
		}
	}
	for _, md := range metadata {
		raw, ok := md[ClassificationKey]
		if !ok {
			continue
		}
		obj, ok := raw.(map[string]any)
		if !ok {
			return "", fmt.Errorf("metadata %q must be an object like {\"level\":\"restricted\"}", ClassificationKey)
		}
		name, ok := obj["level"].(string)
		if !ok {
			return "", fmt.Errorf("metadata %q needs a string \"level\"", ClassificationKey)
		}
		l, err := task.ParseLevel(name)
		if err != nil {
			return "", fmt.Errorf("metadata %q: %w", ClassificationKey, err)
		}
		top = task.Max(top, l)
	}
	return top, nil
}
