package metrics_test

import (
	"fmt"
	"testing"

	"github.com/writ-authz/writ/config"
	"github.com/writ-authz/writ/events"
	"github.com/writ-authz/writ/metrics"
)

// shadowTally is a shadow's evaluation counts (authz.Shadow's Tally).
type shadowTally [4]uint64

func (s shadowTally) Tally() (agree, disagree, errored, dropped uint64) {
	return s[0], s[1], s[2], s[3]
}

// TestShadowLabelsBounded: the code label of writ_shadow_disagreements_total
// takes the first 64 codes a shadow names and "other" after; a direction
// outside the three is "other".
//
// Threat: a draft policy in shadow that names a code per request (a code
// built from the input) grows the metrics without bound and exhausts
// writ's memory and the scraper's. Defence: the code label is bounded to
// the first codes seen, the direction label to its three values.
func TestShadowLabelsBounded(t *testing.T) {
	m := metrics.New(config.Metrics{}, metrics.Sources{})
	url := serveMetrics(t, m)
	for i := range 100 {
		m.ShadowDisagreed(events.ShadowDisagreement{Direction: "allow_to_deny", Code: fmt.Sprintf("CODE_%d", i)})
	}
	m.ShadowDisagreed(events.ShadowDisagreement{Direction: "sideways", Code: "CODE_0"})
	s := scrapeURL(t, url)
	want := map[string]float64{L("code", "other", "direction", "allow_to_deny"): 36, L("code", "CODE_0", "direction", "other"): 1}
	for i := range 64 {
		want[L("code", fmt.Sprintf("CODE_%d", i), "direction", "allow_to_deny")] = 1
	}
	s.want(t, "writ_shadow_disagreements_total", counter, want)
}

// uploadTally is a fixed metrics.Sources.Upload.
type uploadTally metrics.UploadTally

func (u uploadTally) UploadTally() metrics.UploadTally { return metrics.UploadTally(u) }
