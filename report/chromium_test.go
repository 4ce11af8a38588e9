package report

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromiumFlags start headless Chromium quietly on a machine without network:
// no sandbox (tests may run as root), no GPU, no background fetches.
var chromiumFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
}

// chromium finds the Chromium binary. Without one the test is skipped, but
// fails under CI (the CI environment variable set), where it must be installed.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("neither chromium nor chromium-browser is on PATH; CI must install the Debian package chromium")
	}
	t.Skip("neither chromium nor chromium-browser is on PATH (Debian: apt-get install chromium)")
	return ""
}

// runChromium runs one headless Chromium command on a fresh profile, bounded by
// 30 seconds, and returns its standard output.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	label := strings.Join(args[:len(args)-1], " ")
	args = append(append(append([]string{}, chromiumFlags...), "--user-data-dir="+t.TempDir()), args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second // helpers holding the pipes open must not hang the test
	start := time.Now()
	err := cmd.Run()
	t.Logf("chromium %s: %v", label, time.Since(start).Round(time.Millisecond))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("chromium did not finish in 30s; stderr:\n%s", stderr.Bytes())
	}
	if err != nil {
		t.Fatalf("chromium: %v; stderr:\n%s", err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// TestChromiumRendersReport opens the rendered report in headless Chromium,
// checks the numbers in the DOM Chromium built, and takes a screenshot that must
// show the charts' colours. Set WRIT_REPORT_SCREENSHOT=/path.png to keep it.
func TestChromiumRendersReport(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, []byte(renderTestLog(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	target := (&url.URL{Scheme: "file", Path: page}).String()

	dom := string(runChromium(t, bin, "--dump-dom", target))
	if !strings.Contains(dom, "</html>") {
		t.Fatalf("chromium dumped no document:\n%.500s", dom)
	}
	checkNumbers(t, dom)
	for _, want := range []string{"<svg", "<rect", `class="hop caller"`, "PUSH DELIVERED"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the DOM lacks %q", want)
		}
	}

	shot := os.Getenv("WRIT_REPORT_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(dir, "report.png")
	} else if shot, _ = filepath.Abs(shot); shot == "" {
		t.Fatal("WRIT_REPORT_SCREENSHOT is not a usable path")
	}
	_ = os.Remove(shot)
	runChromium(t, bin, "--screenshot="+shot, "--window-size=1280,2000", target)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 2000 {
		t.Errorf("screenshot is %v, want 1280x2000", b.Size())
	}
	// The charts were painted: the allow green and the deny red cover real area.
	for name, c := range map[string]color.RGBA{"allow green": {0x2e, 0x7d, 0x32, 0xff}, "deny red": {0xc6, 0x28, 0x28, 0xff}} {
		n := countColor(img, c)
		t.Logf("%s: %d pixels", name, n)
		if n < 2000 {
			t.Errorf("the screenshot has %d pixels of %s (%v); the charts did not render", n, name, c)
		}
	}
	t.Logf("screenshot: %s", shot)
}

// countColor counts the pixels within a small distance of c.
func countColor(img image.Image, c color.RGBA) int {
	b := img.Bounds()
	rgba, ok := img.(*image.RGBA)
	if !ok { // PNG screenshots decode as RGBA or NRGBA; both are opaque here
		rgba = image.NewRGBA(b)
		draw.Draw(rgba, b, img, b.Min, draw.Src)
	}
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		row := rgba.Pix[(y-b.Min.Y)*rgba.Stride:]
		for x := 0; x < b.Dx(); x++ {
			p := row[4*x:]
			if near(p[0], c.R) && near(p[1], c.G) && near(p[2], c.B) {
				n++
			}
		}
	}
	return n
}

func near(v, want uint8) bool {
	d := int(v) - int(want)
	return d > -12 && d < 12
}
