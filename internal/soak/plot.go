package soak

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strings"
)

// The plot: one PNG, panels stacked on a shared time axis, drawn with the
// standard library only (a 3×5 bitmap font for the labels).

// Series is one line of a panel.
type Series struct {
	Name  string
	Color color.RGBA
	Y     []float64
}

// Panel is one chart.
type Panel struct {
	Title  string
	Series []Series
	// Marks are times (s) drawn as thin vertical lines (policy reloads).
	Marks []float64
}

var (
	white  = color.RGBA{255, 255, 255, 255}
	black  = color.RGBA{30, 30, 30, 255}
	grey   = color.RGBA{200, 200, 200, 255}
	light  = color.RGBA{235, 235, 235, 255}
	blue   = color.RGBA{31, 119, 180, 255}
	orange = color.RGBA{255, 127, 14, 255}
	red    = color.RGBA{214, 39, 40, 255}
	green  = color.RGBA{44, 160, 44, 255}
	purple = color.RGBA{148, 103, 189, 255}
)

// Panels turns samples into the soak's charts.
func Panels(s []Sample, reloads []float64) []Panel {
	col := func(f func(Sample) float64) []float64 {
		out := make([]float64, len(s))
		for i, x := range s {
			out[i] = f(x)
		}
		return out
	}
	return []Panel{
		{Title: "requests answered per second, and errors", Series: []Series{
			{"answered", blue, col(func(x Sample) float64 { return float64(x.Requests) })},
			{"expected refusals", green, col(func(x Sample) float64 { return float64(x.Expected) })},
			{"unexpected errors", red, col(func(x Sample) float64 { return float64(x.Unexpected) })}}},
		{Title: "latency ms, per second (p99.9 is the second's max below 1000 req/s)", Series: []Series{
			{"p50", blue, col(func(x Sample) float64 { return x.P50 })},
			{"p99", orange, col(func(x Sample) float64 { return x.P99 })},
			{"p99.9", red, col(func(x Sample) float64 { return x.P999 })}}},
		{Title: "writ RSS and store file, MiB", Series: []Series{
			{"rss", purple, col(func(x Sample) float64 { return x.RSSMiB })},
			{"store file", green, col(func(x Sample) float64 { return x.StoreMiB })}}},
		{Title: "writ goroutines and open files", Series: []Series{
			{"goroutines", blue, col(func(x Sample) float64 { return float64(x.Goroutines) })},
			{"open fds", orange, col(func(x Sample) float64 { return float64(x.FDs) })}}},
		{Title: "store tasks (policy reloads: grey lines)", Marks: reloads, Series: []Series{
			{"tasks", green, col(func(x Sample) float64 { return float64(x.StoreTasks) })}}},
	}
}

const (
	plotW     = 1200
	panelH    = 190
	marginL   = 70
	marginR   = 20
	titleH    = 24
	axisH     = 36
	fontScale = 2
)

// RenderPNG draws the panels over times t (seconds) and writes a PNG.
func RenderPNG(w io.Writer, title string, t []float64, panels []Panel) error {
	h := titleH + len(panels)*panelH + axisH
	img := image.NewRGBA(image.Rect(0, 0, plotW, h))
	fill(img, img.Bounds(), white)
	text(img, marginL, 6, title, black)
	tmax := 1.0
	if len(t) > 0 {
		tmax = math.Max(t[len(t)-1], 1)
	}
	for i, p := range panels {
		top := titleH + i*panelH
		drawPanel(img, p, t, tmax, image.Rect(marginL, top+titleH, plotW-marginR, top+panelH-8))
	}
	// Time axis under the last panel.
	y := titleH + len(panels)*panelH - 6
	unit, div := "s", 1.0
	if tmax > 300 {
		unit, div = "min", 60
	}
	for k := 0; k <= 10; k++ {
		x := marginL + k*(plotW-marginL-marginR)/10
		label := trimFloat(tmax / div * float64(k) / 10)
		text(img, x-len(label)*4, y+4, label, black)
	}
	label := "t (" + unit + ")"
	text(img, plotW-marginR-len(label)*8, y+18, label, black)
	return png.Encode(w, img)
}

func drawPanel(img *image.RGBA, p Panel, t []float64, tmax float64, r image.Rectangle) {
	// Title and legend.
	x := r.Min.X
	text(img, x, r.Min.Y-titleH+6, p.Title, black)
	lx := r.Min.X + len(p.Title)*8 + 24
	for _, s := range p.Series {
		fill(img, image.Rect(lx, r.Min.Y-titleH+8, lx+14, r.Min.Y-titleH+14), s.Color)
		text(img, lx+18, r.Min.Y-titleH+6, s.Name, s.Color)
		lx += 18 + len(s.Name)*8 + 16
	}
	// Frame and grid.
	ymax := 0.0
	for _, s := range p.Series {
		for _, v := range s.Y {
			ymax = math.Max(ymax, v)
		}
	}
	ymax = niceCeil(ymax)
	for k := 0; k <= 4; k++ {
		y := r.Max.Y - k*r.Dy()/4
		hline(img, r.Min.X, r.Max.X, y, light)
		label := trimFloat(ymax * float64(k) / 4)
		text(img, r.Min.X-6-len(label)*8, y-5, label, black)
	}
	for _, m := range p.Marks {
		xx := r.Min.X + int(m/tmax*float64(r.Dx()))
		vline(img, xx, r.Min.Y, r.Max.Y, grey)
	}
	rect(img, r, black)
	for i := len(p.Series) - 1; i >= 0; i-- { // the first series on top
		s := p.Series[i]
		var px, py int
		for i, v := range s.Y {
			if i >= len(t) {
				break
			}
			xx := r.Min.X + int(t[i]/tmax*float64(r.Dx()))
			yy := r.Max.Y - int(v/ymax*float64(r.Dy()))
			if i > 0 {
				line(img, px, py, xx, yy, s.Color)
			}
			px, py = xx, yy
		}
	}
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y <= y1; y++ {
		img.SetRGBA(x, y, c)
	}
}

func rect(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	hline(img, r.Min.X, r.Max.X, r.Min.Y, c)
	hline(img, r.Min.X, r.Max.X, r.Max.Y, c)
	vline(img, r.Min.X, r.Min.Y, r.Max.Y, c)
	vline(img, r.Max.X, r.Min.Y, r.Max.Y, c)
}

// line draws a segment (Bresenham), two pixels thick.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		img.SetRGBA(x0, y0+1, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// text draws s with the 3×5 font at fontScale; lower case is drawn as upper
// case, unknown characters as blanks.
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, r := range strings.ToUpper(s) {
		g, ok := glyphs[r]
		if ok {
			for row, bits := range g {
				for col := 0; col < 3; col++ {
					if bits[col] == '#' {
						fill(img, image.Rect(x+col*fontScale, y+row*fontScale, x+(col+1)*fontScale, y+(row+1)*fontScale), c)
					}
				}
			}
		}
		x += 4 * fontScale
	}
}

// glyphs is a 3×5 font: digits, capitals and the punctuation the plot uses.
var glyphs = map[rune][5]string{
	'0': {"###", "#.#", "#.#", "#.#", "###"}, '1': {".#.", "##.", ".#.", ".#.", "###"},
	'2': {"###", "..#", "###", "#..", "###"}, '3': {"###", "..#", "###", "..#", "###"},
	'4': {"#.#", "#.#", "###", "..#", "..#"}, '5': {"###", "#..", "###", "..#", "###"},
	'6': {"###", "#..", "###", "#.#", "###"}, '7': {"###", "..#", "..#", ".#.", ".#."},
	'8': {"###", "#.#", "###", "#.#", "###"}, '9': {"###", "#.#", "###", "..#", "###"},
	'A': {".#.", "#.#", "###", "#.#", "#.#"}, 'B': {"##.", "#.#", "##.", "#.#", "##."},
	'C': {".##", "#..", "#..", "#..", ".##"}, 'D': {"##.", "#.#", "#.#", "#.#", "##."},
	'E': {"###", "#..", "##.", "#..", "###"}, 'F': {"###", "#..", "##.", "#..", "#.."},
	'G': {".##", "#..", "#.#", "#.#", ".##"}, 'H': {"#.#", "#.#", "###", "#.#", "#.#"},
	'I': {"###", ".#.", ".#.", ".#.", "###"}, 'J': {"..#", "..#", "..#", "#.#", ".#."},
	'K': {"#.#", "#.#", "##.", "#.#", "#.#"}, 'L': {"#..", "#..", "#..", "#..", "###"},
	'M': {"#.#", "###", "###", "#.#", "#.#"}, 'N': {"##.", "#.#", "#.#", "#.#", "#.#"},
	'O': {".#.", "#.#", "#.#", "#.#", ".#."}, 'P': {"##.", "#.#", "##.", "#..", "#.."},
	'Q': {".#.", "#.#", "#.#", "##.", ".##"}, 'R': {"##.", "#.#", "##.", "#.#", "#.#"},
	'S': {".##", "#..", ".#.", "..#", "##."}, 'T': {"###", ".#.", ".#.", ".#.", ".#."},
	'U': {"#.#", "#.#", "#.#", "#.#", "###"}, 'V': {"#.#", "#.#", "#.#", "#.#", ".#."},
	'W': {"#.#", "#.#", "###", "###", "#.#"}, 'X': {"#.#", "#.#", ".#.", "#.#", "#.#"},
	'Y': {"#.#", "#.#", ".#.", ".#.", ".#."}, 'Z': {"###", "..#", ".#.", "#..", "###"},
	'.': {"...", "...", "...", "...", ".#."}, ',': {"...", "...", "...", ".#.", "#.."},
	'/': {"..#", "..#", ".#.", "#..", "#.."}, '%': {"#.#", "..#", ".#.", "#..", "#.#"},
	'(': {".#.", "#..", "#..", "#..", ".#."}, ')': {".#.", "..#", "..#", "..#", ".#."},
	':': {"...", ".#.", "...", ".#.", "..."}, '-': {"...", "...", "###", "...", "..."},
	'+': {"...", ".#.", "###", ".#.", "..."}, '=': {"...", "###", "...", "###", "..."},
	'_': {"...", "...", "...", "...", "###"}, '>': {"#..", ".#.", "..#", ".#.", "#.."},
	'<': {"..#", ".#.", "#..", ".#.", "..#"}, '@': {"###", "#.#", "#.#", "#..", "###"},
	'×': {"...", "#.#", ".#.", "#.#", "..."}, '→': {"...", ".#.", "###", ".#.", "..."},
}
