package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// baseline is the path every other is compared with.
const baseline = "spell"

// micros formats d in microseconds.
func micros(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 0, 64)
}

// writeTable writes the results as a markdown table: per path and
// concurrency the latency percentiles, the throughput, and their ratios to
// the spell's at the same concurrency (a dash where the spell was not run).
func writeTable(w io.Writer, results []result) {
	spell := map[int]result{}
	for _, r := range results {
		if r.path == baseline {
			spell[r.concurrency] = r
		}
	}
	fmt.Fprintln(w, "| path | goroutines | calls | p50 µs | p99 µs | calls/s | p50 ÷ spell | calls/s ÷ spell | CPU µs per call | CPU ÷ spell | server CPU µs per call |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		p50Ratio, tputRatio, cpu, cpuRatio, server := "–", "–", "–", "–", "–"
		if s, ok := spell[r.concurrency]; ok && s.p50 > 0 && s.throughput() > 0 {
			p50Ratio = fmt.Sprintf("%.2f", float64(r.p50)/float64(s.p50))
			tputRatio = fmt.Sprintf("%.2f", r.throughput()/s.throughput())
			if r.cpu > 0 && s.cpu > 0 {
				cpuRatio = fmt.Sprintf("%.2f", float64(r.cpu)/float64(s.cpu))
			}
		}
		if r.cpu > 0 {
			cpu = micros(r.cpu)
		}
		if r.serverCPU > 0 {
			server = micros(r.serverCPU)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %.0f | %s | %s | %s | %s | %s |\n",
			r.path, r.concurrency, r.ops, micros(r.p50), micros(r.p99), r.throughput(), p50Ratio, tputRatio, cpu, cpuRatio, server)
	}
}

// writePlot draws p50 latency, p99 latency and throughput against
// concurrency, one line per path, side by side, into a PNG file.
func writePlot(file, title string, paths []string, results []result) error {
	panel := func(name, ylabel string, value func(result) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = name
		p.X.Label.Text = "goroutines"
		p.Y.Label.Text = ylabel
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = concurrencyTicks(results)
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.TickerFunc(oneTwoFive)
		p.Legend.Top = true
		p.Legend.Left = true
		var lines []any
		for _, name := range paths {
			var pts plotter.XYs
			for _, r := range results {
				if r.path == name && value(r) > 0 {
					pts = append(pts, plotter.XY{X: float64(r.concurrency), Y: value(r)})
				}
			}
			if len(pts) > 0 {
				lines = append(lines, name, pts)
			}
		}
		if err := plotutil.AddLinePoints(p, lines...); err != nil {
			return nil, err
		}
		return p, nil
	}
	p50, err := panel("median latency", "µs per call", func(r result) float64 { return float64(r.p50) / 1e3 })
	if err != nil {
		return err
	}
	p99, err := panel("99th percentile latency", "µs per call", func(r result) float64 { return float64(r.p99) / 1e3 })
	if err != nil {
		return err
	}
	tput, err := panel("throughput", "calls per second", func(r result) float64 { return r.throughput() })
	if err != nil {
		return err
	}
	// One legend, in the first panel, is enough.
	p99.Legend, tput.Legend = plot.NewLegend(), plot.NewLegend()

	img := vgimg.New(vg.Points(1200), vg.Points(420))
	dc := draw.New(img)
	top := draw.Crop(dc, 0, 0, 0, -vg.Points(30))
	titleStyle := p50.Title.TextStyle
	titleStyle.XAlign, titleStyle.YAlign = draw.XCenter, draw.YTop
	dc.FillText(titleStyle, vg.Point{X: dc.Center().X, Y: dc.Max.Y - vg.Points(6)}, title)
	plots := [][]*plot.Plot{{p50, p99, tput}}
	canvases := plot.Align(plots, draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Points(16), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}, top)
	for i, p := range plots[0] {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("plot: write %s: %w", file, err)
	}
	return f.Close()
}

// concurrencyTicks labels the measured concurrencies.
func concurrencyTicks(results []result) plot.ConstantTicks {
	seen := map[int]bool{}
	var ticks plot.ConstantTicks
	for _, r := range results {
		if !seen[r.concurrency] {
			seen[r.concurrency] = true
			ticks = append(ticks, plot.Tick{Value: float64(r.concurrency), Label: strconv.Itoa(r.concurrency)})
		}
	}
	return ticks
}

// oneTwoFive labels a log axis at 1, 2 and 5 times each power of ten in
// [lo, hi], with unlabelled minor ticks in between.
func oneTwoFive(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for decade := math.Pow(10, math.Floor(math.Log10(lo))); decade <= hi; decade *= 10 {
		for m := 1; m < 10; m++ {
			v := float64(m) * decade
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
