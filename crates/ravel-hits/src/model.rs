//! The world the generator draws from: counters (sites) with their pages, users with fixed
//! attributes, search phrases, and the categorical tables behind the small columns.
//!
//! Everything is derived from the seed. Users are not stored: a user's attributes are drawn from
//! a random stream seeded by the user's number, so any user can be rebuilt at any time.

use rand::{Rng, RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub(crate) type Rand = Xoshiro256PlusPlus;

/// Mixes two numbers into a seed (splitmix64 finaliser).
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_add(0x9E37_79B9_7F4A_7C15).rotate_left(17);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(crate) fn rng(seed: u64, stream: u64) -> Rand {
    Rand::seed_from_u64(mix(seed, stream))
}

/// A 64-bit hash of bytes, as hits' `URLHash` and `RefererHash` hold (values are the
/// generator's own; only their behaviour, equal bytes → equal hash, matters).
pub(crate) fn hash64(bytes: &[u8]) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let v = u64::from_le_bytes(c.try_into().unwrap());
        h = (h ^ v).wrapping_mul(0x0000_0100_0000_01B3).rotate_left(29);
    }
    for &b in chunks.remainder() {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3);
    }
    mix(h, 0x5EED) as i64
}

/// A categorical distribution over small integers given as (value, weight).
pub(crate) struct Cat {
    values: Vec<i32>,
    cum: Vec<u32>,
}

impl Cat {
    pub(crate) fn new(pairs: &[(i32, u32)]) -> Cat {
        let mut total = 0;
        let cum = pairs
            .iter()
            .map(|&(_, w)| {
                total += w;
                total
            })
            .collect();
        Cat {
            values: pairs.iter().map(|&(v, _)| v).collect(),
            cum,
        }
    }

    pub(crate) fn sample(&self, r: &mut Rand) -> i32 {
        let total = *self.cum.last().unwrap();
        let x = r.random_range(0..total);
        self.values[self.cum.partition_point(|&c| c <= x)]
    }
}

const SYLLABLES: [&str; 48] = [
    "ka", "ro", "mi", "ta", "ne", "so", "vi", "la", "po", "du", "re", "zi", "mo", "sa", "ki", "lo",
    "ba", "ve", "ni", "to", "gu", "ra", "se", "pe", "do", "li", "ma", "ko", "zu", "fe", "ri", "na",
    "te", "bo", "ga", "ju", "sh", "ch", "ya", "vo", "mu", "di", "pa", "ze", "lu", "ho", "ty", "ve",
];
const WORDS: [&str; 64] = [
    "news", "auto", "sport", "video", "music", "games", "weather", "market", "forum", "photo",
    "travel", "food", "health", "kino", "tv", "radio", "books", "job", "realty", "finance", "tech",
    "mobile", "soft", "dating", "kids", "fashion", "home", "garden", "pets", "science", "history",
    "art", "shop", "sale", "price", "catalog", "search", "mail", "maps", "blog", "ru", "msk",
    "spb", "online", "free", "best", "top", "new", "city", "club", "info", "portal", "world",
    "life", "style", "beauty", "cars", "moto", "bank", "credit", "loan", "hotel", "tickets",
    "school",
];
const SECTIONS: [&str; 16] = [
    "news",
    "catalog",
    "item",
    "article",
    "forum/topic",
    "photo",
    "video",
    "search",
    "user",
    "category",
    "tag",
    "page",
    "archive",
    "product",
    "blog/post",
    "static",
];
const TLDS: [&str; 6] = ["ru", "ru", "ru", "com", "ua", "net"];
const MOBILE_MODELS: [&str; 16] = [
    "iPhone",
    "iPad",
    "GT-I9300",
    "GT-I9100",
    "GT-S5830",
    "Lumia 920",
    "HTC One",
    "Xperia Z",
    "Nexus 4",
    "GT-N7100",
    "iPod",
    "Galaxy Nexus",
    "Optimus L7",
    "Desire HD",
    "Ascend G300",
    "Lenovo A820",
];
const LANGS: [(&str, &str, u32); 8] = [
    ("ru", "ru", 70),
    ("uk", "ua", 8),
    ("en", "us", 6),
    ("be", "by", 4),
    ("kk", "kz", 4),
    ("tr", "tr", 3),
    ("de", "de", 3),
    ("en", "gb", 2),
];
const UA_MINORS: [&str; 12] = [
    "0", "1", "5", "4", "2", "D0", "1f", "10", "22", "3", "69", "E8",
];
const FLASH_MINOR2: [&str; 8] = ["", "", "", "", "152", "202", "238", "115"];
const CHARSETS: [&str; 4] = ["utf-8", "windows-1251", "utf-8", "koi8-r"];
const RESOLUTIONS: [(i16, i16, u32); 12] = [
    (1366, 768, 24),
    (1920, 1080, 16),
    (1280, 1024, 12),
    (1024, 768, 10),
    (1440, 900, 8),
    (1600, 900, 7),
    (1280, 800, 7),
    (1680, 1050, 5),
    (1280, 720, 4),
    (320, 480, 3),
    (768, 1024, 2),
    (360, 640, 2),
];
const SEARCH_WORDS: [&str; 40] = [
    "kupit",
    "skachat",
    "besplatno",
    "smotret",
    "online",
    "film",
    "serial",
    "pogoda",
    "moskva",
    "avto",
    "otzyvy",
    "cena",
    "igry",
    "muzyka",
    "recept",
    "kak",
    "sdelat",
    "rabota",
    "kvartira",
    "bilety",
    "novosti",
    "foto",
    "video",
    "iphone",
    "samsung",
    "telefon",
    "noutbuk",
    "kredit",
    "bank",
    "karta",
    "spb",
    "2013",
    "torrent",
    "russkom",
    "yazyke",
    "mp3",
    "hd",
    "kupon",
    "vk",
    "odnoklassniki",
];
const UTM_SOURCES: [&str; 6] = ["yandex", "google", "direct", "vk", "begun", "email"];
const UTM_MEDIUMS: [&str; 4] = ["cpc", "banner", "email", "social"];

/// A site's page.
pub(crate) struct Page {
    pub url: Vec<u8>,
    pub title: Vec<u8>,
    /// Pages with query parameters that vary per hit.
    pub has_param: bool,
    pub category: i16,
}

/// A counter (a site).
pub(crate) struct Counter {
    pub id: i32,
    pub pages: Vec<Page>,
    pub counter_class: i16,
    pub charset: u8,
    pub code_version: i32,
    pub region: i32,
    pub is_old: i16,
}

/// A user's fixed attributes.
#[derive(Clone)]
pub(crate) struct User {
    pub user_id: i64,
    pub funiq_id: i64,
    pub home_counter: u32,
    pub client_ip: i32,
    pub region: i32,
    pub os: i16,
    pub user_agent: i16,
    pub ua_major: i16,
    pub ua_minor: u8,
    pub res: u8,
    pub res_depth: i16,
    pub lang: u8,
    pub is_mobile: i16,
    pub mobile_phone: i16,
    pub mobile_model: u8,
    pub flash_major: i16,
    pub flash_minor: i16,
    pub flash_minor2: u8,
    pub net_major: i16,
    pub net_minor: i16,
    pub java: i16,
    pub cookie: i16,
    pub javascript: i16,
    pub silverlight: [i32; 4],
    pub tz: i16,
    pub clock_skew: i32,
    pub age: i16,
    pub sex: i16,
    pub income: i16,
    pub interests: i16,
    pub robotness: i16,
}

pub(crate) struct Model {
    pub seed: u64,
    pub counters: Vec<Counter>,
    counter_cum: Vec<f64>,
    pub users: u64,
    pub phrases: Vec<Vec<u8>>,
    pub search_referers: Vec<Vec<u8>>,
    os: Cat,
    user_agent: Cat,
    region: Cat,
    res: Cat,
    lang: Cat,
}

/// The counter ID that must be among the heaviest (ClickBench Q37–Q43 filter on it).
pub const COUNTER_62: i32 = 62;
/// How many counters (sites) the generator draws from.
pub const COUNTERS: usize = 6000;

impl Model {
    pub(crate) fn new(seed: u64, rows: u64) -> Model {
        let mut r = rng(seed, 1);
        // Zipf(1.0) over counter ranks; rank 1 is counter 62, the other IDs are distinct.
        let weights: Vec<f64> = (0..COUNTERS).map(|k| 1.0 / (k as f64 + 1.0)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let counter_cum: Vec<f64> = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        let mut ids = std::collections::HashSet::new();
        ids.insert(COUNTER_62);
        let mut domains = std::collections::HashSet::new();
        let counters = (0..COUNTERS)
            .map(|rank| {
                let id = if rank == 1 {
                    COUNTER_62
                } else {
                    loop {
                        let id = r.random_range(63..5_000_000);
                        if ids.insert(id) {
                            break id;
                        }
                    }
                };
                let share = weights[rank] / total;
                let n_pages = 8 + (share * 400_000.0).powf(0.6) as usize;
                build_counter(&mut r, id, rank, n_pages, &mut domains)
            })
            .collect();
        let phrases: Vec<Vec<u8>> = (0..4000)
            .map(|_| {
                let n = r.random_range(1..=4);
                let words: Vec<&str> = (0..n)
                    .map(|_| SEARCH_WORDS[r.random_range(0..SEARCH_WORDS.len())])
                    .collect();
                words.join(" ").into_bytes()
            })
            .collect();
        let search_referers = phrases
            .iter()
            .map(|p| {
                let q: String = String::from_utf8_lossy(p).replace(' ', "+");
                if p.len() % 3 == 0 {
                    format!("http://www.google.ru/search?q={q}&ie=utf-8").into_bytes()
                } else {
                    format!("http://yandex.ru/yandsearch?text={q}&lr=213").into_bytes()
                }
            })
            .collect();
        let os = Cat::new(&[
            (2, 30),
            (56, 20),
            (10, 12),
            (44, 8),
            (3, 6),
            (7, 5),
            (34, 5),
            (118, 4),
            (121, 4),
            (66, 3),
            (0, 3),
        ]);
        let user_agent = Cat::new(&[
            (7, 28),
            (2, 20),
            (3, 14),
            (6, 10),
            (4, 8),
            (1, 6),
            (42, 5),
            (10, 4),
            (58, 3),
            (0, 2),
        ]);
        let region_pairs: Vec<(i32, u32)> = [
            213, 2, 225, 54, 47, 43, 65, 66, 35, 62, 193, 39, 56, 51, 172, 1, 11, 48, 10, 146,
        ]
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, 400 / (i as u32 + 1)))
        .chain((0..200).map(|i| (1000 + i * 37, 2)))
        .collect();
        let res = Cat::new(
            &RESOLUTIONS
                .iter()
                .enumerate()
                .map(|(i, r)| (i as i32, r.2))
                .collect::<Vec<_>>(),
        );
        let lang = Cat::new(
            &LANGS
                .iter()
                .enumerate()
                .map(|(i, l)| (i as i32, l.2))
                .collect::<Vec<_>>(),
        );
        Model {
            seed,
            counters,
            counter_cum,
            users: (rows / 25).max(2_000),
            phrases,
            search_referers,
            os,
            user_agent,
            region: Cat::new(&region_pairs),
            res,
            lang,
        }
    }

    /// A counter drawn from the Zipf distribution.
    pub(crate) fn zipf_counter(&self, r: &mut Rand) -> u32 {
        let x: f64 = r.random();
        (self.counter_cum.partition_point(|&c| c < x)).min(COUNTERS - 1) as u32
    }

    /// The user with this number; the same number always gives the same user.
    pub(crate) fn user(&self, n: u64) -> User {
        let mut r = rng(self.seed, 0x1000_0000_0000 + n);
        let is_mobile = r.random_bool(0.12);
        let res = if is_mobile {
            9 + r.random_range(0..3u8)
        } else {
            self.res.sample(&mut r) as u8
        };
        let client_ip = r.next_u32() as i32;
        User {
            user_id: (r.next_u64() >> 1) as i64,
            funiq_id: if r.random_bool(0.3) {
                0
            } else {
                (r.next_u64() >> 1) as i64
            },
            home_counter: self.zipf_counter(&mut r),
            client_ip,
            region: self.region.sample(&mut r),
            os: self.os.sample(&mut r) as i16,
            user_agent: self.user_agent.sample(&mut r) as i16,
            ua_major: r.random_range(0..40),
            ua_minor: r.random_range(0..UA_MINORS.len() as u8),
            res,
            res_depth: if r.random_bool(0.8) { 24 } else { 32 },
            lang: self.lang.sample(&mut r) as u8,
            is_mobile: is_mobile as i16,
            mobile_phone: if is_mobile { r.random_range(1..40) } else { 0 },
            mobile_model: if is_mobile {
                r.random_range(1..=MOBILE_MODELS.len() as u8)
            } else {
                0
            },
            flash_major: if r.random_bool(0.7) {
                r.random_range(9..12)
            } else {
                0
            },
            flash_minor: r.random_range(0..10),
            flash_minor2: r.random_range(0..FLASH_MINOR2.len() as u8),
            net_major: r.random_range(0..5),
            net_minor: r.random_range(0..6),
            java: r.random_bool(0.6) as i16,
            cookie: r.random_bool(0.97) as i16,
            javascript: r.random_bool(0.98) as i16,
            silverlight: if r.random_bool(0.4) {
                [
                    5,
                    r.random_range(0..2),
                    r.random_range(10000..70000),
                    r.random_range(0..2),
                ]
            } else {
                [0; 4]
            },
            tz: if r.random_bool(0.7) {
                4
            } else {
                r.random_range(-2..13)
            },
            clock_skew: if r.random_bool(0.6) {
                0
            } else {
                r.random_range(-600..600)
            },
            age: r.random_range(0..6),
            sex: r.random_range(0..3),
            income: r.random_range(0..5),
            interests: if r.random_bool(0.5) {
                0
            } else {
                r.random_range(1..2048)
            },
            robotness: if r.random_bool(0.95) {
                0
            } else {
                r.random_range(1..100)
            },
        }
    }

    pub(crate) fn resolution(u: &User) -> (i16, i16) {
        let (w, h, _) = RESOLUTIONS[u.res as usize];
        (w, h)
    }

    pub(crate) fn lang(u: &User) -> (&'static str, &'static str) {
        let (l, c, _) = LANGS[u.lang as usize];
        (l, c)
    }

    pub(crate) fn mobile_model(u: &User) -> &'static str {
        match u.mobile_model {
            0 => "",
            m => MOBILE_MODELS[m as usize - 1],
        }
    }

    pub(crate) fn ua_minor(u: &User) -> &'static str {
        UA_MINORS[u.ua_minor as usize]
    }

    pub(crate) fn flash_minor2(u: &User) -> &'static str {
        FLASH_MINOR2[u.flash_minor2 as usize]
    }

    pub(crate) fn charset(c: &Counter) -> &'static str {
        CHARSETS[c.charset as usize]
    }

    pub(crate) fn utm(i: u8) -> (&'static str, &'static str) {
        match i {
            0 => ("", ""),
            i => (
                UTM_SOURCES[(i as usize - 1) % UTM_SOURCES.len()],
                UTM_MEDIUMS[(i as usize - 1) % UTM_MEDIUMS.len()],
            ),
        }
    }
}

fn word(r: &mut Rand) -> &'static str {
    WORDS[r.random_range(0..WORDS.len())]
}

fn name(r: &mut Rand, syllables: usize) -> String {
    (0..syllables)
        .map(|_| SYLLABLES[r.random_range(0..SYLLABLES.len())])
        .collect()
}

fn build_counter(
    r: &mut Rand,
    id: i32,
    rank: usize,
    n_pages: usize,
    domains: &mut std::collections::HashSet<String>,
) -> Counter {
    // Every site has its own domain, so a page belongs to one counter.
    let domain = loop {
        let syllables = r.random_range(1..4);
        let d = format!(
            "{}{}.{}",
            word(r),
            name(r, syllables),
            TLDS[r.random_range(0..TLDS.len())]
        );
        if domains.insert(d.clone()) {
            break d;
        }
    };
    let site_title = {
        let mut t = name(r, 3);
        t[..1].make_ascii_uppercase();
        format!("{t} {}", word(r))
    };
    let pages = (0..n_pages)
        .map(|p| {
            let section = SECTIONS[r.random_range(0..SECTIONS.len())];
            let url = if p == 0 {
                format!("http://{domain}/")
            } else {
                format!(
                    "http://{domain}/{section}/{}-{}{}.html",
                    word(r),
                    name(r, 2),
                    r.random_range(1..100_000)
                )
            };
            let title = if p == 0 {
                site_title.clone()
            } else {
                format!("{} {} {} - {site_title}", word(r), name(r, 2), word(r))
            };
            Page {
                url: url.into_bytes(),
                title: title.into_bytes(),
                has_param: r.random_bool(0.25),
                category: r.random_range(0..60),
            }
        })
        .collect();
    Counter {
        id,
        pages,
        counter_class: r.random_range(0..4),
        charset: r.random_range(0..CHARSETS.len() as u8),
        code_version: if rank < 100 {
            1
        } else {
            r.random_range(0..700)
        },
        region: r.random_range(0..300),
        is_old: r.random_bool(0.3) as i16,
    }
}
