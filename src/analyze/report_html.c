/* report_html.c: a report as one self-contained HTML page.
 *
 * Everything is inline: the style, the charts (SVG drawn here), a few
 * lines of script for the hover read-out, and a Content-Security-Policy
 * that forbids loading anything at all, so the page opens the same on an
 * air-gapped machine and in a ticket system's preview. Every string that
 * came from the report (call sites come from user code, the command line
 * from the user) is HTML-escaped; the charts' data are numbers only. */
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "report_view.h"

/* The chart's geometry, in SVG units. */
#define CW 960.0
#define CH 320.0
#define CL 84.0 /* left margin: the byte labels */
#define CR 16.0
#define CT 24.0
#define CB 36.0
#define PW (CW - CL - CR)
#define PH (CH - CT - CB)

static void esc(ol_buf_t *out, const char *text)
{
  for (const char *c = text ? text : ""; *c; c++) {
    switch (*c) {
    case '&': ol_buf_printf(out, "&amp;"); break;
    case '<': ol_buf_printf(out, "&lt;"); break;
    case '>': ol_buf_printf(out, "&gt;"); break;
    case '"': ol_buf_printf(out, "&quot;"); break;
    case '\'': ol_buf_printf(out, "&#39;"); break;
    default: ol_buf_printf(out, "%c", *c); break;
    }
  }
}

static const char *bytes_text(char buf[32], int64_t bytes)
{
  ol_format_bytes(buf, 32, bytes);
  return buf;
}

static const char *size_text(char buf[32], uint64_t bytes) /* a request: never negative */
{
  ol_format_size(buf, 32, bytes);
  return buf;
}

static const char style[] =
  "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;"
  "background:#f6f7f9;color:#1d2330}"
  "header{background:#1d2330;color:#fff;padding:18px 28px}"
  "header h1{margin:0 0 4px;font-size:22px}header p{margin:2px 0;color:#c9d1e0}"
  "header code{color:#fff}main{padding:8px 28px 28px;max-width:1040px}"
  "section.device{background:#fff;border:1px solid #dde1e8;border-radius:8px;"
  "padding:8px 20px 16px;margin:18px 0}"
  "h2{font-size:19px;margin:10px 0}h3{font-size:15px;margin:18px 0 6px;color:#39414f}"
  ".cards{display:flex;gap:12px;flex-wrap:wrap}"
  ".card{border:1px solid #dde1e8;border-radius:6px;padding:8px 14px;min-width:150px}"
  ".card b{display:block;font-size:20px}.card span{color:#5b6473;font-size:12px}"
  ".card.bad{border-color:#d62728;background:#fdecec}"
  "table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px;"
  "border-bottom:1px solid #eceef2;text-align:right;vertical-align:top}"
  "th{background:#f0f2f5}td.l,th.l{text-align:left}"
  "td.site{text-align:left;font-family:ui-monospace,monospace;font-size:12px}"
  ".site .more{color:#6b7280}.oom{border-left:4px solid #d62728;background:#fdf3f3;"
  "padding:8px 14px}.badge{display:inline-block;background:#d62728;color:#fff;"
  "border-radius:4px;padding:1px 8px;font-weight:600}"
  "svg.chart{width:100%;height:auto;background:#fff}"
  ".muted{color:#6b7280}footer{color:#6b7280;font-size:12px;padding:0 28px 20px}"
  /* On paper the chart shrinks to the page's width (its 960 units to about
   * 700 px), which made 11-unit axis text about 8 px: larger there. */
  "@media print{body{background:#fff}svg.chart{width:100%;height:auto;break-inside:avoid}"
  "svg.chart text{font-size:15px}svg.chart text.tip,svg.chart .guide{display:none}"
  "section.device{break-inside:auto}}";

/* Each point's chart position; a point covers [i, i+1) intervals. */
static double x_at(double seconds, double span)
{
  return CL + seconds / span * PW;
}

static double y_at(double bytes, double top)
{
  return CT + PH - (double)bytes / top * PH;
}

/* A round step (1, 2 or 5 times a power of ten, in units of unit) that
 * cuts range into at most `most` pieces. */
static double round_step(double range, double unit, int most)
{
  double raw = range / unit / most, power = 1;
  while (power * 10 <= raw)
    power *= 10;
  while (power > raw && power > 1e-9)
    power /= 10;
  double steps[] = {1, 2, 2.5, 5, 10};
  for (size_t i = 0; i < 5; i++)
    if (steps[i] * power >= raw)
      return steps[i] * power * unit;
  return 10 * power * unit;
}

static double byte_unit(double bytes)
{
  double unit = 1;
  while (unit * 1024 <= bytes && unit < 1099511627776.0)
    unit *= 1024;
  return unit;
}

/* The byte axis: from 0 to a round value above the highest point. */
static double chart_top(const ol_timeline_t *tl, double *step)
{
  int64_t top = tl->peak_reserved > tl->peak_allocated ? tl->peak_reserved : tl->peak_allocated;
  for (uint32_t i = 0; i < tl->count; i++) {
    top = tl->reserved[i] > top ? tl->reserved[i] : top;
    top = tl->allocated[i] > top ? tl->allocated[i] : top;
  }
  double high = top > 0 ? (double)top * 1.05 : 1.0;
  *step = round_step(high, byte_unit(high), 5);
  return ceil(high / *step) * *step;
}

/* The time unit that reads best for the whole span: its seconds and its
 * name. One rule for the axis, the hover read-out and the points' width,
 * so that they all speak the same unit. */
static double time_unit(double span, const char **name)
{
  static const struct { double limit, seconds; const char *name; } units[] = {
    {2e-3, 1e-6, "us"}, {2.0, 1e-3, "ms"}, {600.0, 1, "s"}, {36000.0, 60, "min"},
  };
  for (size_t i = 0; i < sizeof units / sizeof *units; i++)
    if (span < units[i].limit) {
      *name = units[i].name;
      return units[i].seconds;
    }
  *name = "h";
  return 3600;
}

static void time_text(char *out, size_t cap, double seconds, double span)
{
  const char *name;
  double unit = time_unit(span, &name);
  snprintf(out, cap, "%.4g %s", seconds / unit, name);
}

/* An axis value as bytes: a tick past INT64_MAX (the chart's top is 5%
 * above the highest point) is printed from the double, never cast to a
 * type that cannot hold it. */
static const char *tick_text(char buf[32], double v)
{
  ol_format_size(buf, 32, v > 0 && v < 1.8e19 ? (uint64_t)v : 0);
  return buf;
}

/* Ticks at 0, step, 2 step... up to top: at most this many, whatever the
 * figures (a step too small for top would never end). */
#define MAX_TICKS 64

static void axes(ol_buf_t *out, double top, double ystep, double span)
{
  char b[32];
  for (int i = 0; i < MAX_TICKS && i * ystep <= top * 1.0001; i++) {
    double v = i * ystep;
    double y = y_at(v, top);
    ol_buf_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e7eb\"/>"
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\" "
                  "fill=\"#5b6473\">%s</text>\n", CL, y, CL + PW, y, CL - 6, y + 4,
                  tick_text(b, v));
  }
  const char *name;
  double unit = time_unit(span, &name);
  double xstep = round_step(span, unit, 6);
  for (int i = 0; i < MAX_TICKS && i * xstep <= span * 1.0001; i++) {
    double t = i * xstep;
    time_text(b, sizeof b, t, span);
    ol_buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" "
                  "fill=\"#5b6473\">%s</text>\n", x_at(t, span), CT + PH + 16, b);
  }
  ol_buf_printf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#9aa3b2\"/>\n",
                CL, CT + PH, CL + PW, CT + PH);
}

/* A step line through the points' highest values; first is "M" to start
 * a path, "L" to go on with one. */
static void steps(ol_buf_t *out, const char *first, const int64_t *v, uint32_t n, double top,
                  double dt, double span)
{
  for (uint32_t i = 0; i < n; i++)
    ol_buf_printf(out, "%s%.1f,%.1f L%.1f,%.1f", i ? " L" : first, x_at(i * dt, span),
                  y_at(v[i], top), x_at((i + 1) * dt, span), y_at(v[i], top));
}

static void series(ol_buf_t *out, const ol_timeline_t *tl, double top, double dt, double span)
{
  ol_buf_printf(out, "<path class=\"reserved\" fill=\"#c6dbef\" stroke=\"#6baed6\" d=\"M%.1f,%.1f ",
                CL, CT + PH);
  steps(out, "L", tl->reserved, tl->count, top, dt, span);
  ol_buf_printf(out, " L%.1f,%.1f Z\"/>\n", x_at(tl->count * dt, span), CT + PH);
  ol_buf_printf(out, "<path class=\"allocated\" fill=\"none\" stroke=\"#08519c\" "
                "stroke-width=\"2\" d=\"");
  steps(out, "M", tl->allocated, tl->count, top, dt, span);
  ol_buf_printf(out, "\"/>\n");
}

static void markers(ol_buf_t *out, const ol_timeline_t *tl, double top, double span)
{
  char b[32];
  double px = x_at(ol_timeline_seconds(tl, tl->peak_allocated_ns), span);
  double py = y_at(tl->peak_allocated, top);
  bool right_side = px > CL + PW * 0.7; /* label to the left, clear of an OOM line */
  /* Above the point: nothing of the allocated line is higher than its
   * peak, so the label never lies over it (beside the point it did, where
   * the line went on at the peak's height); below the top margin's legend. */
  double ly = py - 8 < CT + 10 ? CT + 10 : py - 8;
  ol_buf_printf(out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"#ff7f0e\"/>"
                "<text class=\"peak\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"#b35806\" "
                "text-anchor=\"%s\">peak allocated %s</text>\n", px, py,
                right_side ? px - 7 : px + 7, ly, right_side ? "end" : "start",
                bytes_text(b, tl->peak_allocated));
  uint32_t kept = tl->oom_count < OL_TIMELINE_OOMS ? tl->oom_count : OL_TIMELINE_OOMS;
  for (uint32_t i = 0; i < kept; i++) {
    double x = x_at(ol_timeline_seconds(tl, tl->ooms[i].t_ns), span);
    ol_buf_printf(out, "<g class=\"oom-mark\"><title>out of memory: a request of %s</title>"
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#d62728\" "
                  "stroke-width=\"3\" stroke-dasharray=\"6 3\"/><text x=\"%.1f\" y=\"%.1f\" "
                  "font-size=\"12\" font-weight=\"bold\" fill=\"#d62728\" text-anchor=\"end\">"
                  "OOM (%s)</text></g>\n", size_text(b, tl->ooms[i].request), x, CT, x,
                  CT + PH, x - 4, CT + 12, b);
  }
}

/* The points, and the axis's time unit for the hover read-out (u: its
 * seconds, un: its name). */
static void chart_data(ol_buf_t *out, const ol_timeline_t *tl, int index, double dt)
{
  const char *name;
  double unit = time_unit(tl->count * dt, &name);
  ol_buf_printf(out, "<script type=\"application/json\" id=\"points-%d\">{\"l\":%.1f,\"pw\":%.1f,"
                "\"w\":%.1f,\"dt\":%.9g,\"u\":%.9g,\"un\":\"%s\",\"n\":%" PRIu32 ",\"a\":[",
                index, CL, PW, CW, dt, unit, name, tl->count);
  for (uint32_t i = 0; i < tl->count; i++)
    ol_buf_printf(out, "%s%" PRId64, i ? "," : "", tl->allocated[i]);
  ol_buf_printf(out, "],\"r\":[");
  for (uint32_t i = 0; i < tl->count; i++)
    ol_buf_printf(out, "%s%" PRId64, i ? "," : "", tl->reserved[i]);
  ol_buf_printf(out, "]}</script>\n");
}

static void chart(ol_buf_t *out, const ol_report_device_t *d, int index)
{
  const ol_timeline_t *tl = &d->timeline;
  ol_buf_printf(out, "<h3>Memory over time</h3>\n");
  if (!d->has_timeline || tl->count == 0) {
    ol_buf_printf(out, "<p class=\"muted\">This report has no timeline (written by an oomlens "
                  "before format 1.1).</p>\n");
    return;
  }
  double ystep, dt = (double)tl->width_ns / 1e9, span = tl->count * dt;
  double top = chart_top(tl, &ystep);
  ol_buf_printf(out, "<svg class=\"chart\" data-points=\"points-%d\" viewBox=\"0 0 %.0f %.0f\" "
                "role=\"img\" aria-label=\"allocated and reserved memory over time\">\n",
                index, CW, CH);
  axes(out, top, ystep, span);
  series(out, tl, top, dt, span);
  markers(out, tl, top, span);
  ol_buf_printf(out, "<line class=\"guide\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#111\" "
                "visibility=\"hidden\"/><text class=\"tip\" x=\"%.1f\" y=\"14\" font-size=\"12\" "
                "text-anchor=\"end\"></text>\n", CT, CT + PH, CL + PW);
  ol_buf_printf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"#c6dbef\" "
                "stroke=\"#6baed6\"/><text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">reserved</text>"
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"3\" fill=\"#08519c\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">allocated</text>\n", CL, 4.0,
                CL + 16, 14.0, CL + 90, 9.0, CL + 106, 14.0);
  ol_buf_printf(out, "</svg>\n");
  chart_data(out, tl, index, dt);
  char width[32];
  time_text(width, sizeof width, dt, dt * 10);
  ol_buf_printf(out, "<p class=\"muted\">%" PRIu32 " points of %s each, each the highest "
                "value in its span; hover for the figures.</p>\n", tl->count, width);
}

static const char *errors_word(int64_t count)
{
  return count == 1 ? "out-of-memory error" : "out-of-memory errors";
}

static void card(ol_buf_t *out, const char *label, const char *value, bool bad)
{
  ol_buf_printf(out, "<div class=\"card%s\"><b>", bad ? " bad" : "");
  esc(out, value);
  ol_buf_printf(out, "</b><span>%s</span></div>\n", label);
}

static void cards(ol_buf_t *out, const ol_report_device_t *d)
{
  char a[32], r[32], w[32], n[32];
  const ol_device_stats_t *s = &d->stats;
  int64_t pa = s->allocated_bytes[OL_POOL_ALL].peak, pr = s->reserved_bytes[OL_POOL_ALL].peak;
  snprintf(n, sizeof n, "%lld", (long long)s->num_ooms);
  ol_buf_printf(out, "<div class=\"cards\">\n");
  card(out, "peak allocated", bytes_text(a, pa), false);
  card(out, "peak reserved", bytes_text(r, pr), false);
  card(out, "reserved beyond peak allocated", bytes_text(w, pr > pa ? pr - pa : 0), false);
  card(out, errors_word(s->num_ooms), n, s->num_ooms > 0);
  ol_buf_printf(out, "</div>\n");
}

static void oom_row(ol_buf_t *out, const char *what, int64_t bytes)
{
  char b[32];
  ol_buf_printf(out, "<tr><td class=\"l\">%s</td><td>%s</td></tr>\n", what,
                bytes >= 0 ? bytes_text(b, bytes) : "unknown");
}

static void oom_section(ol_buf_t *out, const ol_report_device_t *d, bool view_is_trace)
{
  const ol_device_stats_t *s = &d->stats;
  if (s->num_ooms == 0)
    return;
  char b[32];
  ol_buf_printf(out, "<h3>Why it ran out</h3>\n<div class=\"oom\">\n");
  if (!d->diagnosed) {
    ol_buf_printf(out, "<p>%lld %s; the last asked for %s. %s</p></div>\n",
                  (long long)s->num_ooms, errors_word(s->num_ooms), size_text(b, s->last_oom_request),
                  view_is_trace ? "A trace records the request, not the device: "
                  "<code>oomlens replay TRACE --capacity SIZE</code> diagnoses it on a device "
                  "of the size it ran on." : "No diagnosis was recorded (the device&#39;s "
                  "capacity was unknown).");
    return;
  }
  const ol_oom_record_t *r = &s->last_oom;
  char q[32], c[32], res[32], al[32];
  ol_buf_printf(out, "<p><span class=\"badge\">");
  esc(out, ol_oom_class_name(s->last_oom_class));
  ol_buf_printf(out, "</span> %s: a request of %s on a %s device where this process held %s "
                "reserved, %s allocated (%lld %s in all).</p>\n<table>\n",
                ol_oom_class_meaning(s->last_oom_class), bytes_text(q, (int64_t)r->request),
                bytes_text(c, (int64_t)r->capacity), bytes_text(res, r->reserved),
                bytes_text(al, r->allocated), (long long)s->num_ooms, errors_word(s->num_ooms));
  oom_row(out, "request", (int64_t)r->request);
  oom_row(out, "device capacity", (int64_t)r->capacity);
  oom_row(out, "device free", r->device_free);
  oom_row(out, "this process: reserved", r->reserved);
  oom_row(out, "this process: allocated", r->allocated);
  oom_row(out, "reserved but free", r->free_reserved);
  oom_row(out, "largest free block", r->largest_free_block);
  oom_row(out, "held by others", r->external);
  oom_row(out, "outlives iterations", r->persistent);
  ol_buf_printf(out, "<tr><td class=\"l\">iterations seen</td><td>%" PRIu64 "</td></tr>\n",
                r->iterations);
  ol_buf_printf(out, "</table>\n");
  ol_buf_printf(out, "<p><b>What to change:</b> ");
  if (d->advice) {
    esc(out, d->advice);
  } else { /* a report without the advice text: the same words, made again */
    ol_buf_t text = {0};
    ol_oom_explain(&text, r, s->last_oom_class, ol_report_oom_namer, (void *)d);
    esc(out, text.failed ? "" : text.data);
    ol_buf_free(&text);
  }
  if (r->segments_only)
    ol_buf_printf(out, " (oomlens saw the framework&#39;s cached segments, not its tensors: run "
                  "under <code>oomlens run --manage</code> to tell weights from activations.)");
  ol_buf_printf(out, "</p>\n");
  ol_buf_printf(out, "</div>\n");
}

static void site_cell(ol_buf_t *out, const ol_report_frames_t *frames)
{
  ol_buf_printf(out, "<td class=\"site\">");
  size_t n = frames->count;
  if (n == 0)
    ol_buf_printf(out, "<span class=\"more\">(no frames recorded)</span>");
  for (size_t f = 0; f < n && f < OL_REPORT_FRAMES_SHOWN; f++) {
    ol_buf_printf(out, f ? "<br><span class=\"more\">&larr; " : "<b>");
    esc(out, frames->frame[f]);
    ol_buf_printf(out, f ? "</span>" : "</b>");
  }
  if (n > OL_REPORT_FRAMES_SHOWN)
    ol_buf_printf(out, "<br><span class=\"more\">(%zu more frames)</span>",
                  n - OL_REPORT_FRAMES_SHOWN);
  ol_buf_printf(out, "</td>");
}

static void sites_section(ol_buf_t *out, const ol_report_device_t *d)
{
  ol_buf_printf(out, "<h3>Who held the memory at the peak</h3>\n");
  size_t n = d->at_peak.count;
  if (n == 0) {
    ol_buf_printf(out, "<p class=\"muted\">No call sites recorded (run with OOMLENS_STACKS=1)."
                  "</p>\n");
    return;
  }
  int64_t peak = d->stats.allocated_bytes[OL_POOL_ALL].peak;
  ol_buf_printf(out, "<table class=\"sites\"><tr><th>bytes at peak</th><th>share</th>"
                "<th>allocations</th><th class=\"l\">call site (innermost first)</th></tr>\n");
  for (size_t i = 0; i < n && i < 10; i++) {
    const ol_report_site_t *site = &d->at_peak.site[i];
    char b[32];
    ol_buf_printf(out, "<tr><td>%s</td><td>%.1f%%</td><td>%lld</td>", bytes_text(b, site->bytes),
                  peak > 0 ? 100.0 * (double)site->bytes / (double)peak : 0.0,
                  (long long)site->allocations);
    site_cell(out, &site->frames);
    ol_buf_printf(out, "</tr>\n");
  }
  ol_buf_printf(out, "</table>\n");
}

/* What a trace cannot tell: it records blocks and segments, not how much
 * of a block is in use (active), the size asked for (requested), or which
 * of PyTorch's pools a segment went to. Such rows read n/a, not 0 B. */
static bool trace_lacks(const ol_device_stats_t *s, const ol_stat_t stat[], int pool)
{
  return stat == s->active_bytes || stat == s->requested_bytes || stat == s->active ||
         (stat == s->reserved_bytes && pool != OL_POOL_ALL);
}

static void summary_rows(ol_buf_t *out, const char *title, const ol_stat_t stat[], bool bytes,
                         const ol_device_stats_t *of_trace)
{
  static const char *const pools[OL_POOL_COUNT] = {"", "from large pool", "from small pool"};
  for (int p = 0; p < OL_POOL_COUNT; p++) {
    const ol_stat_t *s = &stat[p];
    int64_t v[4] = {s->current, s->peak, s->allocated, s->freed};
    bool unknown = of_trace && trace_lacks(of_trace, stat, p);
    ol_buf_printf(out, "<tr><td class=\"l\">%s%s</td>", p ? "&nbsp;&nbsp;&nbsp;" : "",
                  p ? pools[p] : title);
    for (int c = 0; c < 4; c++) {
      char b[32];
      if (unknown)
        snprintf(b, sizeof b, "n/a");
      else if (bytes)
        ol_format_bytes(b, sizeof b, v[c]);
      else
        snprintf(b, sizeof b, "%lld", (long long)v[c]);
      ol_buf_printf(out, "<td>%s</td>", b);
    }
    ol_buf_printf(out, "</tr>\n");
  }
}

/* is_trace: the rows a trace cannot give read n/a (trace_lacks). */
static void summary_table(ol_buf_t *out, const ol_device_stats_t *s, bool is_trace)
{
  ol_buf_printf(out, "<h3>Summary</h3>\n<table class=\"summary\"><tr><th class=\"l\">metric</th>"
                "<th>current</th><th>peak</th><th>total allocated</th><th>total freed</th>"
                "</tr>\n");
#define OL_HTML_ROWS(field, title, bytes) \
  summary_rows(out, title, s->field, bytes, is_trace ? s : NULL);
  OL_STAT_FIELDS(OL_HTML_ROWS)
#undef OL_HTML_ROWS
  ol_buf_printf(out, "</table>\n");
}

static void device_section(ol_buf_t *out, const ol_report_device_t *d, int index, bool is_trace)
{
  ol_buf_printf(out, "<section class=\"device\">\n<h2>Device %d</h2>\n", d->device);
  cards(out, d);
  chart(out, d, index);
  oom_section(out, d, is_trace);
  sites_section(out, d);
  summary_table(out, &d->stats, is_trace);
  ol_buf_printf(out, "</section>\n");
}

static const char hover_script[] =
  "<script>\n"
  "(function(){\n"
  "function fmt(b){var u=['B','KiB','MiB','GiB','TiB'],k=0;"
  "while(b>=1024&&k<4){b/=1024;k++;}return (k?b.toFixed(2):b)+' '+u[k];}\n"
  "document.querySelectorAll('svg.chart').forEach(function(svg){\n"
  " var d=JSON.parse(document.getElementById(svg.dataset.points).textContent);\n"
  " var tip=svg.querySelector('.tip'),guide=svg.querySelector('.guide');\n"
  " svg.addEventListener('mousemove',function(ev){\n"
  "  var box=svg.getBoundingClientRect(),x=(ev.clientX-box.left)*d.w/box.width;\n"
  "  var i=Math.floor((x-d.l)/d.pw*d.n);\n"
  "  if(i<0||i>=d.n){tip.textContent='';guide.setAttribute('visibility','hidden');return;}\n"
  "  guide.setAttribute('x1',x);guide.setAttribute('x2',x);"
  "guide.setAttribute('visibility','visible');\n"
  "  tip.textContent=(i*d.dt/d.u).toPrecision(4)+' '+d.un+': allocated '+fmt(d.a[i])+"
  "', reserved '"
  "+fmt(d.r[i]);\n"
  " });\n"
  "});\n"
  "})();\n"
  "</script>\n";

static void page_header(ol_buf_t *out, const ol_report_t *v)
{
  char stamp[64] = "";
  time_t when = (time_t)v->time_unix;
  struct tm tm;
  if (v->time_unix > 0 && gmtime_r(&when, &tm))
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", &tm);
  ol_buf_printf(out, "<header><h1>oomlens memory report</h1>\n<p>");
  if (!ol_report_is_trace(v)) {
    ol_buf_printf(out, "pid %ld, rank ", v->pid);
    esc(out, v->rank);
    ol_buf_printf(out, ", written at ");
    esc(out, v->reason);
    ol_buf_printf(out, " (%s), ", stamp);
    esc(out, v->mode);
    ol_buf_printf(out, " mode, oomlens ");
    esc(out, v->version);
    ol_buf_printf(out, "</p>\n<p>command: <code>");
    esc(out, v->command);
    ol_buf_printf(out, "</code></p></header>\n");
  } else {
    ol_buf_printf(out, "the recorded trace ");
    esc(out, v->source);
    ol_buf_printf(out, " (tensors: allocated; PyTorch&#39;s segments: reserved)</p></header>\n");
  }
}

void ol_view_html(ol_buf_t *out, const ol_report_t *v)
{
  ol_buf_printf(out, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                "<title>oomlens report, pid %ld, rank ", v->pid);
  esc(out, v->rank);
  ol_buf_printf(out, "</title>\n<style>%s</style></head><body>\n", style);
  page_header(out, v);
  ol_buf_printf(out, "<main>\n");
  if (v->tracking_failed)
    ol_buf_printf(out, "<p class=\"oom\">Tracking stopped early (out of host memory): the "
                  "figures stop at that point.</p>\n");
  if (v->device_count == 0)
    ol_buf_printf(out, "<p>No device memory was allocated through CUDA in this process.</p>\n");
  for (int d = 0; d < v->device_count; d++)
    device_section(out, &v->devices[d], d, ol_report_is_trace(v));
  ol_buf_printf(out, "</main>\n<footer>Written by oomlens %s from ", OL_VERSION_TEXT);
  esc(out, v->source);
  ol_buf_printf(out, ". Self-contained: nothing is loaded from the network.</footer>\n%s"
                "</body></html>\n", hover_script);
}
