//! The hits generator: sessions of users on counters across July 2013, emitted in arrival order.
//!
//! The month is cut into hourly slices whose row counts follow a daily cycle. In each slice
//! sessions start (a user, mostly on the user's home counter, a few hits a few seconds to
//! minutes apart, pages from the counter's page set); the hits of all sessions are merged by
//! event time and emitted as batches, as a telemetry system receives them. Hits that fall after
//! the end of their slice wait for the next one, so the output is in EventTime order.

use std::rc::Rc;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, Date32Array, Int16Array, Int32Array, Int64Array, RecordBatch,
    StringArray, TimestampSecondArray, UInt16Array,
};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::SchemaRef;
use rand::{Rng, RngCore};

use crate::model::{Model, Rand, User, hash64, mix, rng};
use crate::schema::{COLUMNS, Convention, Strings, schema};

/// 2013-07-01 00:00:00 UTC.
pub const JULY_2013_START: i64 = 1_372_636_800;
/// 2013-08-01 00:00:00 UTC.
pub const JULY_2013_END: i64 = JULY_2013_START + 31 * 86_400;
const SLICE_SECONDS: i64 = 3_600;
const SLICES_PER_DAY: usize = (86_400 / SLICE_SECONDS) as usize;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenOptions {
    pub rows: u64,
    pub seed: u64,
    pub convention: Convention,
    /// Rows per batch (the last batch may be shorter).
    pub batch_rows: usize,
    /// The first day of the event times, in days after 2013-07-01.
    pub first_day: u32,
    /// Days the event times span (at least 1).
    pub days: u32,
    /// Seed of the world the rows happen in: its counters, their pages and ids, the search
    /// phrases. `None`: `seed`. Loads of one table made with one world seed and different
    /// seeds are different days of the same sites, as a growing table receives them.
    pub world_seed: Option<u64>,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            rows: 1_000_000,
            seed: 1,
            convention: Convention::default(),
            batch_rows: 65_536,
            first_day: 0,
            days: 31,
            world_seed: None,
        }
    }
}

/// How a session was referred.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Direct,
    Search,
    External,
    Ad,
}

struct Session {
    user: User,
    counter: u32,
    source: Source,
    /// Search phrase index (Search) or referring counter (External).
    referrer: u32,
    len: u16,
    window_name: i32,
    window: (i16, i16),
    utm: u8,
}

struct Hit {
    t: i64,
    seq: u64,
    hit_no: u16,
    page: u32,
    prev_page: u32,
    param: u32,
    /// Randomness of this hit's own columns (WatchID, HID, timings, flags): drawn when the hit
    /// is made, so the output does not depend on how rows are cut into batches.
    noise: u64,
    session: Rc<Session>,
}

impl Hit {
    /// A random number for column `k` of this hit.
    fn rand(&self, k: u64) -> u64 {
        mix(self.noise, k)
    }
}

/// A deterministic stream of hits batches in arrival order.
pub struct Generator {
    opts: GenOptions,
    schema: SchemaRef,
    model: Model,
    /// Cumulative row quota at the end of each slice.
    quotas: Vec<u64>,
    slice: usize,
    started_rows: u64,
    emitted_rows: u64,
    seq: u64,
    pending: Vec<Hit>,
    ready: std::collections::VecDeque<Hit>,
    session_rng: Rand,
}

impl Generator {
    pub fn new(opts: GenOptions) -> Generator {
        let model = Model::new(opts.world_seed.unwrap_or(opts.seed), opts.rows);
        // Daily cycle: busiest around 14:00 UTC (evening in Moscow), quietest around 02:00;
        // weekends a little quieter.
        let slices = opts.days.max(1) as usize * SLICES_PER_DAY;
        let weights: Vec<f64> = (0..slices)
            .map(|s| {
                let hour = (s % 24) as f64;
                let day = opts.first_day as usize + s / 24; // 2013-07-01 was a Monday.
                let weekend = if day % 7 >= 5 { 0.85 } else { 1.0 };
                weekend * (1.0 + 0.7 * ((hour - 14.0) / 24.0 * std::f64::consts::TAU).cos())
            })
            .collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let quotas = weights
            .iter()
            .map(|w| {
                acc += w;
                ((acc / total) * opts.rows as f64).round() as u64
            })
            .collect::<Vec<_>>();
        let mut quotas = quotas;
        *quotas.last_mut().unwrap() = opts.rows;
        Generator {
            schema: schema(opts.convention),
            session_rng: rng(opts.seed, 2),
            opts,
            model,
            quotas,
            slice: 0,
            started_rows: 0,
            emitted_rows: 0,
            seq: 0,
            pending: Vec::new(),
            ready: Default::default(),
        }
    }

    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The first second of the event times.
    fn first_second(&self) -> i64 {
        JULY_2013_START + i64::from(self.opts.first_day) * 86_400
    }

    /// The second past the last event time.
    fn end_second(&self) -> i64 {
        self.first_second() + i64::from(self.opts.days.max(1)) * 86_400
    }

    /// Starts the sessions of the next slice and moves the hits before its end to `ready`.
    fn advance_slice(&mut self) {
        let s = self.slice;
        let start = self.first_second() + s as i64 * SLICE_SECONDS;
        let end = start + SLICE_SECONDS;
        let last = s + 1 == self.quotas.len();
        while self.started_rows < self.quotas[s] {
            let room = self.opts.rows - self.started_rows;
            self.start_session(start, room);
        }
        // Stable by (time, sequence): deterministic.
        self.pending.sort_unstable_by_key(|h| (h.t, h.seq));
        let cut = if last {
            self.pending.len()
        } else {
            self.pending.partition_point(|h| h.t < end)
        };
        self.ready.extend(self.pending.drain(..cut));
        self.slice += 1;
    }

    fn start_session(&mut self, slice_start: i64, room: u64) {
        let end = self.end_second();
        let r = &mut self.session_rng;
        // Active users are drawn more often: a power law over user numbers.
        let u = ((r.random::<f64>().powi(2)) * self.model.users as f64) as u64;
        let user = self.model.user(u);
        let counter = if r.random_bool(0.85) {
            user.home_counter
        } else {
            self.model.zipf_counter(r)
        };
        let source = match r.random_range(0..100) {
            0..45 => Source::Direct,
            45..70 => Source::Search,
            70..92 => Source::External,
            _ => Source::Ad,
        };
        let referrer = match source {
            Source::Search => r.random_range(0..self.model.phrases.len() as u32),
            Source::External => self.model.zipf_counter(r),
            _ => 0,
        };
        // Session length: 1 + geometric with mean ~3.5, capped.
        let mut len: u64 = 1;
        while len < 60 && r.random_bool(0.78) {
            len += 1;
        }
        let len = len.min(room);
        let (w, h) = Model::resolution(&user);
        let window = (
            (w - r.random_range(0..w / 8 + 1)).max(1),
            (h - 100 - r.random_range(0..h / 4 + 1)).max(1),
        );
        let session = Rc::new(Session {
            counter,
            source,
            referrer,
            len: len as u16,
            window_name: if r.random_bool(0.2) {
                -1
            } else {
                r.next_u32() as i32
            },
            window,
            utm: if source == Source::Ad {
                r.random_range(1..=12)
            } else {
                0
            },
            user,
        });
        let n_pages = self.model.counters[counter as usize].pages.len() as f64;
        let mut t = slice_start + r.random_range(0..SLICE_SECONDS);
        let mut prev_page = u32::MAX;
        for hit_no in 0..len as u16 {
            // Popular pages first: a skewed draw over the counter's pages.
            let page = (r.random::<f64>().powi(3) * n_pages) as u32;
            let param = if r.random_bool(0.5) {
                r.random_range(1..5000)
            } else {
                0
            };
            self.pending.push(Hit {
                t: t.min(end - 1),
                seq: self.seq,
                hit_no,
                page,
                prev_page,
                param,
                noise: r.next_u64(),
                session: session.clone(),
            });
            self.seq += 1;
            prev_page = page;
            // Seconds to minutes between hits.
            t += 1 + (-(1.0 - r.random::<f64>()).ln() * 45.0) as i64;
        }
        self.started_rows += len;
    }

    fn next_hits(&mut self) -> Option<Vec<Hit>> {
        let want = (self.opts.batch_rows as u64).min(self.opts.rows - self.emitted_rows) as usize;
        if want == 0 {
            return None;
        }
        while self.ready.len() < want && self.slice < self.quotas.len() {
            self.advance_slice();
        }
        let hits: Vec<Hit> = self.ready.drain(..want.min(self.ready.len())).collect();
        self.emitted_rows += hits.len() as u64;
        (!hits.is_empty()).then_some(hits)
    }

    /// Builds the 105 columns of a batch of hits.
    fn materialize(&mut self, hits: &[Hit]) -> RecordBatch {
        let m = &self.model;
        let conv = self.opts.convention;
        let mut url_buf: Vec<u8> = Vec::with_capacity(128);
        let columns: Vec<ArrayRef> = COLUMNS
            .iter()
            .map(|&(name, kind)| -> ArrayRef {
                let counter = |h: &Hit| &m.counters[h.session.counter as usize];
                let page = |h: &Hit| &counter(h).pages[h.page as usize];
                let i16s = |f: &mut dyn FnMut(&Hit) -> i16| -> ArrayRef {
                    Arc::new(Int16Array::from_iter_values(hits.iter().map(f)))
                };
                let i32s = |f: &mut dyn FnMut(&Hit) -> i32| -> ArrayRef {
                    Arc::new(Int32Array::from_iter_values(hits.iter().map(f)))
                };
                let i64s = |f: &mut dyn FnMut(&Hit) -> i64| -> ArrayRef {
                    Arc::new(Int64Array::from_iter_values(hits.iter().map(f)))
                };
                let times = |offset: &dyn Fn(&Hit) -> i64| -> ArrayRef {
                    let v = hits.iter().map(|h| h.t + offset(h));
                    match conv {
                        Convention::Raw(_) => Arc::new(Int64Array::from_iter_values(v)),
                        Convention::Typed => Arc::new(TimestampSecondArray::from_iter_values(v)),
                    }
                };
                let texts = |f: &mut dyn FnMut(&Hit, &mut Vec<u8>)| -> ArrayRef {
                    text_array(conv, hits, f)
                };
                let urlf = |h: &Hit, page_no: u32, out: &mut Vec<u8>| {
                    let c = counter(h);
                    let p = &c.pages[page_no as usize];
                    out.extend_from_slice(&p.url);
                    if p.has_param && h.param > 0 {
                        out.extend_from_slice(b"?id=");
                        push_int(out, h.param as u64);
                    }
                };
                let referer = |h: &Hit, out: &mut Vec<u8>| {
                    if h.hit_no > 0 {
                        urlf(h, h.prev_page, out);
                        return;
                    }
                    let s = &h.session;
                    match s.source {
                        Source::Direct => {}
                        Source::Search => {
                            out.extend_from_slice(&m.search_referers[s.referrer as usize])
                        }
                        Source::External => {
                            let c = &m.counters[s.referrer as usize];
                            out.extend_from_slice(
                                &c.pages[(s.window_name as u32 as usize) % c.pages.len()].url,
                            )
                        }
                        Source::Ad => out.extend_from_slice(b"http://an.yandex.ru/count/"),
                    }
                };
                match name {
                    "WatchID" => i64s(&mut |h| (h.rand(1) >> 1) as i64),
                    "JavaEnable" => i16s(&mut |h| u(h).java),
                    "Title" => texts(&mut |h, o| o.extend_from_slice(&page(h).title)),
                    "GoodEvent" => i16s(&mut |_| 1),
                    "EventTime" => times(&|_| 0),
                    "EventDate" => {
                        let days = hits.iter().map(|h| h.t.div_euclid(86_400));
                        match conv {
                            Convention::Raw(_) => {
                                Arc::new(UInt16Array::from_iter_values(days.map(|d| d as u16)))
                            }
                            Convention::Typed => {
                                Arc::new(Date32Array::from_iter_values(days.map(|d| d as i32)))
                            }
                        }
                    }
                    "CounterID" => i32s(&mut |h| counter(h).id),
                    "ClientIP" => i32s(&mut |h| u(h).client_ip),
                    "RegionID" => i32s(&mut |h| u(h).region),
                    "UserID" => i64s(&mut |h| u(h).user_id),
                    "CounterClass" => i16s(&mut |h| counter(h).counter_class),
                    "OS" => i16s(&mut |h| u(h).os),
                    "UserAgent" => i16s(&mut |h| u(h).user_agent),
                    "URL" => texts(&mut |h, o| urlf(h, h.page, o)),
                    "Referer" => texts(&mut |h, o| referer(h, o)),
                    "IsRefresh" => i16s(&mut |h| (h.rand(2) % 20 == 0) as i16),
                    "RefererCategoryID" => i16s(&mut |h| {
                        if h.hit_no > 0 { page(h).category } else { 0 }
                    }),
                    "RefererRegionID" => {
                        i32s(&mut |h| if h.hit_no > 0 { counter(h).region } else { 0 })
                    }
                    "URLCategoryID" => i16s(&mut |h| page(h).category),
                    "URLRegionID" => i32s(&mut |h| counter(h).region),
                    "ResolutionWidth" => i16s(&mut |h| Model::resolution(u(h)).0),
                    "ResolutionHeight" => i16s(&mut |h| Model::resolution(u(h)).1),
                    "ResolutionDepth" => i16s(&mut |h| u(h).res_depth),
                    "FlashMajor" => i16s(&mut |h| u(h).flash_major),
                    "FlashMinor" => i16s(&mut |h| u(h).flash_minor),
                    "FlashMinor2" => {
                        texts(&mut |h, o| o.extend_from_slice(Model::flash_minor2(u(h)).as_bytes()))
                    }
                    "NetMajor" => i16s(&mut |h| u(h).net_major),
                    "NetMinor" => i16s(&mut |h| u(h).net_minor),
                    "UserAgentMajor" => i16s(&mut |h| u(h).ua_major),
                    "UserAgentMinor" => {
                        texts(&mut |h, o| o.extend_from_slice(Model::ua_minor(u(h)).as_bytes()))
                    }
                    "CookieEnable" => i16s(&mut |h| u(h).cookie),
                    "JavascriptEnable" => i16s(&mut |h| u(h).javascript),
                    "IsMobile" => i16s(&mut |h| u(h).is_mobile),
                    "MobilePhone" => i16s(&mut |h| u(h).mobile_phone),
                    "MobilePhoneModel" => {
                        texts(&mut |h, o| o.extend_from_slice(Model::mobile_model(u(h)).as_bytes()))
                    }
                    "Params" => texts(&mut |h, o| {
                        if h.param % 16 == 1 {
                            o.extend_from_slice(b"{\"ref\":");
                            push_int(o, h.param as u64);
                            o.push(b'}');
                        }
                    }),
                    "IPNetworkID" => i32s(&mut |h| (u(h).client_ip as u32 >> 12) as i32),
                    "TraficSourceID" => i16s(&mut |h| match (h.hit_no, h.session.source) {
                        (1.., _) => -1,
                        (0, Source::Direct) => 0,
                        (0, Source::Ad) => 1,
                        (0, Source::Search) => 2,
                        (0, Source::External) => 3,
                    }),
                    "SearchEngineID" => i16s(&mut |h| {
                        if h.hit_no == 0 && h.session.source == Source::Search {
                            2 + m.phrases[h.session.referrer as usize]
                                .len()
                                .is_multiple_of(3) as i16
                        } else {
                            0
                        }
                    }),
                    "SearchPhrase" => texts(&mut |h, o| {
                        if h.hit_no == 0 && h.session.source == Source::Search {
                            o.extend_from_slice(&m.phrases[h.session.referrer as usize])
                        }
                    }),
                    "AdvEngineID" => i16s(&mut |h| {
                        if h.session.source == Source::Ad {
                            2 + (h.session.utm % 3) as i16
                        } else {
                            0
                        }
                    }),
                    "IsArtifical" => i16s(&mut |_| 0),
                    "WindowClientWidth" => i16s(&mut |h| h.session.window.0),
                    "WindowClientHeight" => i16s(&mut |h| h.session.window.1),
                    "ClientTimeZone" => i16s(&mut |h| u(h).tz),
                    "ClientEventTime" => times(&|h| h.session.user.clock_skew as i64),
                    "SilverlightVersion1" => i16s(&mut |h| u(h).silverlight[0] as i16),
                    "SilverlightVersion2" => i16s(&mut |h| u(h).silverlight[1] as i16),
                    "SilverlightVersion3" => i32s(&mut |h| u(h).silverlight[2]),
                    "SilverlightVersion4" => i16s(&mut |h| u(h).silverlight[3] as i16),
                    "PageCharset" => texts(&mut |h, o| {
                        o.extend_from_slice(Model::charset(counter(h)).as_bytes())
                    }),
                    "CodeVersion" => i32s(&mut |h| counter(h).code_version),
                    "IsLink" => i16s(&mut |h| (h.rand(3) % 50 == 0) as i16),
                    "IsDownload" => i16s(&mut |h| (h.rand(4) % 200 == 0) as i16),
                    "IsNotBounce" => i16s(&mut |h| (h.session.len > 1) as i16),
                    "FUniqID" => i64s(&mut |h| u(h).funiq_id),
                    "OriginalURL" => texts(&mut |h, o| {
                        if h.param % 20 == 3 {
                            urlf(h, h.page, o)
                        }
                    }),
                    "HID" => i32s(&mut |h| h.rand(5) as i32),
                    "IsOldCounter" => i16s(&mut |h| counter(h).is_old),
                    "IsEvent" => i16s(&mut |h| (h.rand(6) % 100 == 0) as i16),
                    "IsParameter" => i16s(&mut |h| (h.param % 100 == 7) as i16),
                    "DontCountHits" => i16s(&mut |h| (h.rand(7) % 100 == 0) as i16),
                    "WithHash" => i16s(&mut |h| (h.rand(8) % 20 == 0) as i16),
                    "HitColor" => texts(&mut |h, o| o.push(b"55555FED"[(h.rand(9) % 8) as usize])),
                    "LocalEventTime" => times(&|h| h.session.user.tz as i64 * 3600 - 4 * 3600),
                    "Age" => i16s(&mut |h| u(h).age),
                    "Sex" => i16s(&mut |h| u(h).sex),
                    "Income" => i16s(&mut |h| u(h).income),
                    "Interests" => i16s(&mut |h| u(h).interests),
                    "Robotness" => i16s(&mut |h| u(h).robotness),
                    "RemoteIP" => i32s(&mut |h| {
                        // Mostly the client's address; sometimes a proxy's.
                        if h.rand(40).is_multiple_of(10) {
                            u(h).client_ip ^ (h.rand(41) & 0xff) as i32
                        } else {
                            u(h).client_ip
                        }
                    }),
                    "WindowName" => i32s(&mut |h| h.session.window_name),
                    "OpenerName" => i32s(&mut |h| {
                        if h.hit_no == 0 && h.session.window_name % 11 == 0 {
                            h.session.window_name / 3
                        } else {
                            0
                        }
                    }),
                    "HistoryLength" => {
                        i16s(&mut |h| h.hit_no as i16 + (h.session.window_name as u32 % 4) as i16)
                    }
                    "BrowserLanguage" => {
                        texts(&mut |h, o| o.extend_from_slice(Model::lang(u(h)).0.as_bytes()))
                    }
                    "BrowserCountry" => {
                        texts(&mut |h, o| o.extend_from_slice(Model::lang(u(h)).1.as_bytes()))
                    }
                    "SocialNetwork"
                    | "SocialAction"
                    | "SocialSourcePage"
                    | "ParamOrderID"
                    | "OpenstatServiceName"
                    | "OpenstatCampaignID"
                    | "OpenstatAdID"
                    | "OpenstatSourceID"
                    | "UTMContent"
                    | "UTMTerm"
                    | "FromTag" => texts(&mut |_, _| {}),
                    "HTTPError" => i16s(&mut |h| if h.rand(10) % 500 == 0 { 404 } else { 0 }),
                    "SendTiming"
                    | "DNSTiming"
                    | "ConnectTiming"
                    | "ResponseStartTiming"
                    | "ResponseEndTiming"
                    | "FetchTiming" => i32s(&mut |h| {
                        let x = h.rand(11 + name.len() as u64) as u32;
                        if x.is_multiple_of(3) {
                            0
                        } else {
                            (x >> 20) as i32 % 2000
                        }
                    }),
                    "SocialSourceNetworkID" | "ParamCurrencyID" | "HasGCLID" => i16s(&mut |_| 0),
                    "ParamPrice" => i64s(&mut |_| 0),
                    "ParamCurrency" => texts(&mut |h, o| {
                        if h.session.source == Source::Ad {
                            o.extend_from_slice(b"RUB")
                        }
                    }),
                    "UTMSource" => texts(&mut |h, o| {
                        o.extend_from_slice(Model::utm(h.session.utm).0.as_bytes())
                    }),
                    "UTMMedium" => texts(&mut |h, o| {
                        o.extend_from_slice(Model::utm(h.session.utm).1.as_bytes())
                    }),
                    "UTMCampaign" => texts(&mut |h, o| {
                        if h.session.utm > 0 {
                            o.extend_from_slice(b"campaign_");
                            push_int(o, h.session.utm as u64 * 7 + counter(h).id as u64 % 13);
                        }
                    }),
                    "RefererHash" => i64s(&mut |h| {
                        url_buf.clear();
                        referer(h, &mut url_buf);
                        if url_buf.is_empty() {
                            0
                        } else {
                            hash64(&url_buf)
                        }
                    }),
                    "URLHash" => i64s(&mut |h| {
                        url_buf.clear();
                        urlf(h, h.page, &mut url_buf);
                        hash64(&url_buf)
                    }),
                    "CLID" => i32s(&mut |_| 0),
                    other => unreachable!("hits column {other} ({kind:?}) has no generator"),
                }
            })
            .collect();
        RecordBatch::try_new(self.schema.clone(), columns)
            .expect("generated columns match the schema")
    }
}

impl Iterator for Generator {
    type Item = RecordBatch;

    fn next(&mut self) -> Option<RecordBatch> {
        let hits = self.next_hits()?;
        Some(self.materialize(&hits))
    }
}

fn u(h: &Hit) -> &User {
    &h.session.user
}

fn push_int(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn text_array(conv: Convention, hits: &[Hit], f: &mut dyn FnMut(&Hit, &mut Vec<u8>)) -> ArrayRef {
    let mut values: Vec<u8> = Vec::with_capacity(hits.len() * 16);
    let mut offsets: Vec<i32> = Vec::with_capacity(hits.len() + 1);
    offsets.push(0);
    for h in hits {
        f(h, &mut values);
        offsets.push(i32::try_from(values.len()).expect("batch text under 2 GiB"));
    }
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    let values = Buffer::from_vec(values);
    match conv {
        Convention::Raw(Strings::Binary) => Arc::new(BinaryArray::new(offsets, values, None)),
        // Generated text is ASCII; try_new still checks it.
        _ => {
            Arc::new(StringArray::try_new(offsets, values, None).expect("generated text is UTF-8"))
        }
    }
}

/// Generates all rows as batches (convenience for tests and small tools).
pub fn generate(opts: GenOptions) -> (SchemaRef, Vec<RecordBatch>) {
    let g = Generator::new(opts);
    let schema = g.schema();
    (schema, g.collect())
}

#[cfg(test)]
mod tests {
    use arrow::array::Array;
    use arrow::compute::concat_batches;

    use super::*;

    fn fnv(h: &mut u64, bytes: &[u8]) {
        for b in bytes {
            *h ^= u64::from(*b);
            *h = h.wrapping_mul(0x100_0000_01b3);
        }
    }

    /// FNV-1a over each column's name and buffers, all rows in one batch.
    fn checksum(opts: GenOptions) -> u64 {
        let (schema, batches) = generate(opts);
        let b = concat_batches(&schema, &batches).unwrap();
        let mut h = 0xcbf2_9ce4_8422_2325;
        for (field, col) in schema.fields().iter().zip(b.columns()) {
            fnv(&mut h, field.name().as_bytes());
            for buf in col.to_data().buffers() {
                fnv(&mut h, buf.as_slice());
            }
        }
        h
    }

    /// The default days (all of July 2013) give the rows the generator gave before it took a
    /// first day and a number of days: the checksums were recorded from that generator.
    #[test]
    fn the_default_days_give_the_rows_of_july_as_before() {
        let raw = GenOptions {
            rows: 3_000,
            seed: 1,
            ..GenOptions::default()
        };
        assert_eq!(checksum(raw), 0x2a7e_bd51_3a85_57a5);
        let typed = GenOptions {
            rows: 20_000,
            seed: 7,
            convention: Convention::Typed,
            ..GenOptions::default()
        };
        assert_eq!(checksum(typed), 0xb897_316d_bee9_ba61);
    }

    /// Days generated with one world seed and different seeds are different rows of the same
    /// counters: the ids a day holds are among the ids of the world's other days.
    #[test]
    fn one_world_seed_keeps_the_counters_across_days() {
        let ids = |seed, world_seed, first_day| {
            let g = Generator::new(GenOptions {
                rows: 20_000,
                seed,
                world_seed,
                first_day,
                days: 1,
                ..GenOptions::default()
            });
            let ids: std::collections::BTreeSet<i32> =
                g.model.counters.iter().map(|c| c.id).collect();
            ids
        };
        assert_eq!(ids(101, Some(1), 31), ids(102, Some(1), 32));
        assert_eq!(ids(1, Some(1), 0), ids(1, None, 0));
        assert_ne!(ids(101, None, 31), ids(102, None, 32));
        let rows = |seed| {
            checksum(GenOptions {
                rows: 3_000,
                seed,
                world_seed: Some(1),
                ..GenOptions::default()
            })
        };
        assert_ne!(rows(101), rows(102), "the seed still draws the rows");
    }

    /// A later span keeps the weekly cycle of its absolute days: a weekend day gets fewer rows
    /// than the weekday before it.
    #[test]
    fn a_span_keeps_the_weekday_of_its_days() {
        // Days 5 and 6 after 2013-07-01 (a Monday) are a Saturday and a Sunday; day 4 a Friday.
        let g = Generator::new(GenOptions {
            rows: 100_000,
            first_day: 4,
            days: 2,
            ..GenOptions::default()
        });
        let friday = g.quotas[SLICES_PER_DAY - 1];
        let saturday = g.quotas[2 * SLICES_PER_DAY - 1] - friday;
        assert!(saturday * 100 < friday * 90, "{saturday} vs {friday}");
    }
}
