package console

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/calloutproxy/callout-proxy/proxy/api"
)

// The charts' drawing area, in SVG user units: a plot of plotW × plotH
// right of a margin for the y axis' label.
const (
	chartW, chartH = 1200, 150
	marginL        = 48
	marginB        = 20
	plotW          = chartW - marginL - 8
	plotH          = chartH - marginB - 8
)

// chartRanges are the ranges the endpoint page offers (the API's,
// stats.Ranges).
var chartRanges = []string{"1h", "6h", "24h", "7d"}

// chart is one SVG chart, its geometry computed here so the template only
// writes numbers into attributes (no script, no inline style: the CSP).
type chart struct {
	Name, Title string
	W, H        int
	// Bars are stacked per point, each with a class for its colour and a
	// title (the browser's tooltip).
	Bars []shape
	// Lines are polylines, one per series, and Dots their points (a line
	// of one point draws nothing).
	Lines []shape
	Dots  []shape
	// YMax labels the top of the y axis; XFirst and XLast the ends of the
	// x axis; Left, Top and Bot are the plot's edges.
	YMax          string
	XFirst, XLast string
	Legend        []legend
	// Empty is true when every value is 0.
	Empty          bool
	Left, Top, Bot int
}

// shape is a bar (X, Y, Width, Height), a dot (X, Y) or a polyline
// (Points).
type shape struct {
	X, Y, Width, Height string
	Points              string
	Class, Title        string
}

// legend is one series' name and colour class.
type legend struct{ Class, Label string }

// num formats a coordinate.
func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// newChart starts a chart of doc's points whose values reach top (in
// unit), and returns it with the width of one point and the height of one
// unit of value.
func newChart(name, title string, doc api.EndpointStatsDoc, top int64, unit string) (chart, float64, float64) {
	c := chart{Name: name, Title: title, W: chartW, H: chartH, Left: marginL, Top: 8, Bot: chartH - marginB}
	if len(doc.Points) > 0 {
		c.XFirst = doc.Points[0].Start.UTC().Format("Jan 2 15:04")
		c.XLast = doc.Points[len(doc.Points)-1].Start.UTC().Format("Jan 2 15:04") + " UTC"
	}
	if top <= 0 {
		c.Empty, top = true, 1
	}
	c.YMax = strconv.FormatInt(top, 10) + unit
	step := float64(plotW) / float64(max(len(doc.Points), 1))
	return c, step, float64(plotH) / float64(top)
}

// stacked is a chart of stacked bars: per point, each series' value.
func stacked(name, title string, doc api.EndpointStatsDoc, series []legend, values func(api.StatsPointDoc) []int64) chart {
	var top int64
	for _, p := range doc.Points {
		var sum int64
		for _, v := range values(p) {
			sum += v
		}
		top = max(top, sum)
	}
	c, step, scale := newChart(name, title, doc, top, "")
	c.Legend = series
	for i, p := range doc.Points {
		y := float64(c.Bot)
		for k, v := range values(p) {
			if v == 0 {
				continue
			}
			h := float64(v) * scale
			y -= h
			c.Bars = append(c.Bars, shape{X: num(float64(marginL) + float64(i)*step), Y: num(y),
				Width: num(max(step-1, 0.5)), Height: num(h), Class: series[k].Class,
				Title: p.Start.UTC().Format("15:04") + " " + series[k].Label + ": " + strconv.FormatInt(v, 10)})
		}
	}
	return c
}

// latencyChart draws the p50, p95 and p99 latency of the points with
// attempts as lines.
func latencyChart(doc api.EndpointStatsDoc) chart {
	var top int64
	for _, p := range doc.Points {
		top = max(top, p.LatencyP99)
	}
	c, step, scale := newChart("latency", "Attempt latency (ms)", doc, top, " ms")
	c.Legend = []legend{{"lat-p50", "p50"}, {"lat-p95", "p95"}, {"lat-p99", "p99"}}
	of := []func(api.StatsPointDoc) int64{
		func(p api.StatsPointDoc) int64 { return p.LatencyP50 },
		func(p api.StatsPointDoc) int64 { return p.LatencyP95 },
		func(p api.StatsPointDoc) int64 { return p.LatencyP99 },
	}
	for k, l := range c.Legend {
		var pts []byte
		for i, p := range doc.Points {
			if p.Success+p.Retryable+p.Permanent == 0 {
				continue
			}
			v := of[k](p)
			x, y := num(float64(marginL)+(float64(i)+0.5)*step), num(float64(c.Bot)-float64(v)*scale)
			pts = append(pts, x+","+y+" "...)
			c.Dots = append(c.Dots, shape{X: x, Y: y, Class: l.Class,
				Title: p.Start.UTC().Format("15:04") + " " + l.Label + ": " + strconv.FormatInt(v, 10) + " ms"})
		}
		if len(pts) > 0 {
			c.Lines = append(c.Lines, shape{Points: string(pts), Class: l.Class, Title: l.Label})
		}
	}
	return c
}

// endpointData is an endpoint's page: its state and its charts over Range.
type endpointData struct {
	Endpoint api.EndpointDoc
	Stats    api.EndpointStatsDoc
	Range    string
	Ranges   []string
	Charts   []chart
	// Awaiting counts its dead letters awaiting action.
	Awaiting       int
	AwaitingCapped bool
}

// Step is a point's length, for the page's note.
func (d endpointData) Step() string {
	return (time.Duration(d.Stats.StepSeconds) * time.Second).String()
}

// handleEndpoint serves GET /console/endpoints/{name}?range=: the
// endpoint's state (GET /admin/v1/endpoints/{name}) and charts of its
// attempts by class, dead letters and latency over the range (GET
// /admin/v1/endpoints/{name}/stats).
func (c *console) handleEndpoint(w http.ResponseWriter, r *http.Request, s *session) {
	name := url.PathEscape(chi.URLParam(r, "name"))
	d := endpointData{Range: r.URL.Query().Get("range"), Ranges: chartRanges}
	if d.Range == "" {
		d.Range = "1h"
	}
	if err := c.get(r, s, "/admin/v1/endpoints/"+name, &d.Endpoint); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	if err := c.get(r, s, "/admin/v1/endpoints/"+name+"/stats?range="+url.QueryEscape(d.Range), &d.Stats); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	var err error
	if d.Awaiting, d.AwaitingCapped, err = c.awaiting(r, s, d.Endpoint.Name); err != nil {
		c.renderAPIError(w, r, s, err)
		return
	}
	d.Charts = []chart{
		stacked("attempts", "Attempts by class", d.Stats,
			[]legend{{"cls-success", "success"}, {"cls-retryable", "retryable"}, {"cls-permanent", "permanent"}},
			func(p api.StatsPointDoc) []int64 { return []int64{p.Success, p.Retryable, p.Permanent} }),
		stacked("dead-letters", "Dead letters", d.Stats, []legend{{"dead", "dead letters"}},
			func(p api.StatsPointDoc) []int64 { return []int64{p.DeadLetters} }),
		latencyChart(d.Stats),
	}
	c.render(w, r, s, http.StatusOK, "endpoint", "Endpoint "+d.Endpoint.Name, d)
}
