package config

import (
	"strings"
	"testing"
	"time"
)

// TestDecisionUploadDefaults: decision_log.upload with its url alone takes
// the documented defaults.
func TestDecisionUploadDefaults(t *testing.T) {
	c, err := Parse([]byte(strings.Replace(good, "policies: [../policies]\n", "decision_log: {upload: {url: 'http://collector:8080'}}\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	u := c.DecisionLog.Upload
	if u.Resource != "/logs" || u.BufferBytes != 16<<20 || u.ChunkBytes != 32<<10 || u.MinDelay != 5*time.Second ||
		u.MaxDelay != 10*time.Second || u.Queue != 10000 || c.DecisionLog.Output != "stdout" || !u.ShipsLifecycle() {
		t.Errorf("defaults: %+v (output %q)", u, c.DecisionLog.Output)
	}
}

// TestDecisionUploadLifecycle: decision_log.upload.lifecycle is on unless
// set false; a value that is no boolean is refused, naming the key.
func TestDecisionUploadLifecycle(t *testing.T) {
	doc := func(v string) []byte {
		return []byte(strings.Replace(good, "policies: [../policies]\n", "decision_log: {upload: {url: 'http://collector:8080'"+v+"}}\n", 1))
	}
	for v, want := range map[string]bool{"": true, ", lifecycle: true": true, ", lifecycle: false": false} {
		c, err := Parse(doc(v))
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if got := c.DecisionLog.Upload.ShipsLifecycle(); got != want {
			t.Errorf("%q: ships lifecycle %v, want %v", v, got, want)
		}
	}
	if _, err := Parse(doc(", lifecycle: sometimes")); err == nil || !strings.Contains(err.Error(), "lifecycle") {
		t.Errorf("lifecycle: sometimes: %v, want refused naming the key", err)
	}
	var none *DecisionUpload
	if none.ShipsLifecycle() {
		t.Error("no upload ships lifecycle lines")
	}
}

// TestDecisionUploadValidation: each wrong decision_log.upload value is
// refused with its key and why.
func TestDecisionUploadValidation(t *testing.T) {
	for up, want := range map[string]string{
		"{url: 'ftp://c/logs'}":                                "decision_log.upload.url: must be the collector's http(s) URL",
		"{url: 'http://u:p@c'}":                                "decision_log.upload.url: must be the collector's http(s) URL",
		"{url: 'http://c', resource: logs}":                    "decision_log.upload.resource: must be a path starting with /",
		"{url: 'http://c', buffer_bytes: -1}":                  "decision_log.upload: buffer_bytes, chunk_bytes and queue must be positive",
		"{url: 'http://c', buffer_bytes: 10, chunk_bytes: 20}": "decision_log.upload.chunk_bytes: must be at most buffer_bytes",
		"{url: 'http://c', min_delay: 1500ms}":                 "decision_log.upload.min_delay: must be a whole number of seconds",
		"{url: 'http://c', min_delay: 30s, max_delay: 10s}":    "decision_log.upload.max_delay: must be at least min_delay",
		"{url: 'http://c', mask: [input/caller]}":              "decision_log.upload.mask[0]: must be a JSON pointer",
		"{url: 'http://c', mask: [/secret/x]}":                 "decision_log.upload.mask[0]: must be a JSON pointer",
	} {
		_, err := Parse([]byte(strings.Replace(good, "policies: [../policies]\n", "decision_log: {upload: "+up+"}\n", 1)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", up, err, want)
		}
	}
}

// TestStatusAndLabelsValidation: each wrong status: or labels: value is
// refused with its key and why.
func TestStatusAndLabelsValidation(t *testing.T) {
	for doc, want := range map[string]string{
		"status: {url: 'ftp://s'}\n":                         "status.url: must be the status service's http(s) URL",
		"status: {url: 'http://s', partition_name: 'a/b'}\n": "status.partition_name: must be one path segment",
		"labels: {'9lives': x}\n":                            "labels: \"9lives\": a label's name is",
		"labels: {version: x}\n":                             "labels.version: is writ's own label",
		"labels: {writ_version: x}\n":                        "labels.writ_version: is writ's own label",
	} {
		_, err := Parse([]byte(strings.Replace(good, "policies: [../policies]\n", doc, 1)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
	if _, err := Parse([]byte(strings.Replace(good, "policies: [../policies]\n", "labels: {cluster: dxb-1}\nstatus: {url: 'https://status.bank.example', partition_name: edge}\n", 1))); err != nil {
		t.Errorf("good status and labels: %v", err)
	}
}
