//! A/B assignment, as app/experiments/bucketing.py did it: MurmurHash3 x86 32-bit (seed 1) buckets
//! of `"<name>:<NFC unit>"` (a salt between), layers with slot ranges, a global holdout and
//! QA-forced variants. One call per request.

use serde::Deserialize;
use unicode_normalization::UnicodeNormalization;

use crate::fmt::quoted;

/// Buckets (and layer slots) per hash.
pub const BUCKETS: u64 = 10_000;
/// The holdout's name in exposures and metrics.
pub const HOLDOUT: &str = "holdout";
/// The holdout's other side, counted so its split can be SRM-checked.
pub const HOLDOUT_REST: &str = "rest";
/// The QA header forced variants come from (named by its 422s).
pub const FORCE_HEADER: &str = "X-Rearrange-Force-Variant";
/// The one variant of an interleaving experiment: a unit in it gets the merged page.
pub const INTERLEAVED: &str = "interleaved";

/// MurmurHash3 x86 32-bit of `data` with `seed`.
pub fn murmur3_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, b) in tail.iter().enumerate() {
            k |= (*b as u32) << (8 * i);
        }
        h ^= k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// floor(h · 10000 / 2^32) of `"<name>:<NFC unit>"` or `"<name>:<salt>:<NFC unit>"`.
pub fn bucket(name: &str, unit_value: &str, salt: &str) -> u32 {
    let unit: String = unit_value.nfc().collect();
    let key = if salt.is_empty() {
        format!("{name}:{unit}")
    } else {
        format!("{name}:{salt}:{unit}")
    };
    ((murmur3_32(key.as_bytes(), 1) as u64 * BUCKETS) >> 32) as u32
}

/// An experiment: variants as (name, upper bucket exclusive) in listed order.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub name: String,
    pub unit: String,
    pub variants: Vec<(String, u32)>,
    #[serde(default)]
    pub salt: String,
    #[serde(default)]
    pub layer: Option<String>,
    #[serde(default = "all_slots")]
    pub slots: (u32, u32),
    /// An interleaving experiment's two profiles (its one variant is `INTERLEAVED`).
    #[serde(default)]
    pub interleave: Option<Interleave>,
}

/// The profiles an interleaving experiment merges the pages of.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct Interleave {
    pub control: String,
    pub treatment: String,
}

fn all_slots() -> (u32, u32) {
    (0, BUCKETS as u32)
}

/// The global holdout: units in [0, upper) of its hash get no experiment.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct Holdout {
    pub unit: String,
    pub upper: u32,
    #[serde(default)]
    pub salt: String,
}

impl Experiment {
    fn in_slots(&self, value: &str) -> bool {
        match &self.layer {
            None => true,
            Some(layer) => {
                let b = bucket(layer, value, "");
                self.slots.0 <= b && b < self.slots.1
            }
        }
    }

    fn variant_of(&self, value: &str) -> (Option<&str>, u32) {
        let b = bucket(&self.name, value, &self.salt);
        let v = self
            .variants
            .iter()
            .find(|(_, upper)| b < *upper)
            .map(|(v, _)| v.as_str());
        (v, b)
    }
}

/// One experiment a request is exposed to, for the response and the audit log.
#[derive(Debug, Clone, PartialEq)]
pub struct Exposure {
    pub experiment: String,
    pub variant: String,
    pub bucket: Option<u32>,
    pub layer: Option<String>,
    pub salt: Option<String>,
    pub forced: bool,
    /// The unit's value as the request gave it (None: forced without one).
    pub unit: Option<String>,
    /// Its gated rules changed the page or would have in shadow (an interleaving: the
    /// two arms' pages differ); set after the run (`crate::exposure`).
    pub triggered: bool,
}

/// One request's assignment.
#[derive(Debug, Default)]
pub struct Assignment {
    pub exposures: Vec<Exposure>,
    /// Experiment → variant, for the runner.
    pub variants: Vec<(String, String)>,
    /// (experiment, variant) pairs for rearrange_experiment_assignments_total.
    pub counted: Vec<(String, String)>,
}

fn get<'u, U: AsRef<str>>(unit: &'u [(U, U)], field: &str) -> Option<&'u str> {
    // A JSON object decoded into a dict keeps the last value of a repeated key.
    unit.iter()
        .rev()
        .find(|(k, _)| k.as_ref() == field)
        .map(|(_, v)| v.as_ref())
        .filter(|v| !v.is_empty())
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Assign one request; `forced` (experiment → variant, checked by `check_forced`) wins.
/// `routed`: the profile the request was routed to (None: it named one), the only one an
/// interleaving experiment takes over, and only when it is the experiment's control.
pub fn assign<U: AsRef<str>>(
    experiments: &[Experiment],
    holdout: Option<&Holdout>,
    unit: &[(U, U)],
    forced: &[(String, String)],
    routed: Option<&str>,
) -> Assignment {
    let mut out = Assignment::default();
    let mut held = false;
    if let Some(h) = holdout {
        if let Some(value) = get(unit, &h.unit) {
            let hb = bucket(HOLDOUT, value, &h.salt);
            held = hb < h.upper;
            let side = if held { HOLDOUT } else { HOLDOUT_REST };
            out.counted.push((HOLDOUT.into(), side.into()));
            if held {
                out.exposures.push(Exposure {
                    experiment: HOLDOUT.into(),
                    variant: HOLDOUT.into(),
                    bucket: Some(hb),
                    layer: None,
                    salt: non_empty(&h.salt),
                    forced: false,
                    unit: Some(value.into()),
                    triggered: false,
                });
            }
        }
    }
    let forced_of = |name: &str| {
        forced
            .iter()
            .rev()
            .find(|(e, _)| e == name)
            .map(|(_, v)| v.as_str())
    };
    let forced_layers: Vec<&str> = experiments
        .iter()
        .filter(|e| forced_of(&e.name).is_some())
        .filter_map(|e| e.layer.as_deref())
        .collect();
    for exp in experiments {
        let value = get(unit, &exp.unit);
        if let Some(variant) = forced_of(&exp.name) {
            let b = value.map(|v| exp.variant_of(v).1);
            out.variants.push((exp.name.clone(), variant.into()));
            out.exposures.push(Exposure {
                experiment: exp.name.clone(),
                variant: variant.into(),
                bucket: b,
                layer: exp.layer.clone(),
                salt: non_empty(&exp.salt),
                forced: true,
                unit: value.map(Into::into),
                triggered: false,
            });
            continue;
        }
        let Some(value) = value else { continue };
        let takes_over = |i: &Interleave| routed == Some(i.control.as_str());
        if held
            || exp.interleave.as_ref().is_some_and(|i| !takes_over(i))
            || exp
                .layer
                .as_deref()
                .is_some_and(|l| forced_layers.contains(&l))
            || !exp.in_slots(value)
        {
            continue;
        }
        let (Some(variant), b) = exp.variant_of(value) else {
            continue;
        };
        out.variants.push((exp.name.clone(), variant.into()));
        out.counted.push((exp.name.clone(), variant.into()));
        out.exposures.push(Exposure {
            experiment: exp.name.clone(),
            variant: variant.into(),
            bucket: Some(b),
            layer: exp.layer.clone(),
            salt: non_empty(&exp.salt),
            forced: false,
            unit: Some(value.into()),
            triggered: false,
        });
    }
    out
}

/// The problem with a QA-forced assignment (named against the header), if any.
pub fn check_forced(experiments: &[Experiment], forced: &[(String, String)]) -> Result<(), String> {
    let mut layers: Vec<(&str, &str)> = Vec::new();
    for (name, variant) in forced {
        let Some(exp) = experiments.iter().find(|e| &e.name == name) else {
            let running: Vec<&str> = experiments.iter().map(|e| e.name.as_str()).collect();
            let running = if running.is_empty() {
                "none".to_string()
            } else {
                running.join(", ")
            };
            return Err(format!(
                "unknown experiment {} (running: {running})",
                quoted(name)
            ));
        };
        if !exp.variants.iter().any(|(v, _)| v == variant) {
            let known: Vec<&str> = exp.variants.iter().map(|(v, _)| v.as_str()).collect();
            return Err(format!(
                "experiment {name} has no variant {} (variants: {})",
                quoted(variant),
                known.join(", ")
            ));
        }
        if let Some(layer) = &exp.layer {
            if let Some((_, other)) = layers.iter().find(|(l, _)| l == layer) {
                return Err(format!(
                    "{other} and {name} share layer {layer}: a request is in one experiment per layer"
                ));
            }
            layers.push((layer, name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_the_published_vectors() {
        let raw = include_str!("../../../tests/data/bucketing_vectors.json");
        let doc: serde_json::Value = serde_json::from_str(raw).unwrap();
        let vectors = doc["vectors"].as_array().unwrap();
        assert!(vectors.len() > 50);
        for v in vectors {
            let key = v["key"].as_str().unwrap();
            assert_eq!(
                murmur3_32(key.as_bytes(), 1) as u64,
                v["hash"].as_u64().unwrap(),
                "{key}"
            );
            let salt = v["salt"].as_str().unwrap_or("");
            let b = bucket(
                v["name"].as_str().unwrap(),
                v["unit"].as_str().unwrap(),
                salt,
            );
            assert_eq!(b as u64, v["bucket"].as_u64().unwrap(), "{key}");
        }
    }

    fn exp(name: &str, layer: Option<&str>, slots: (u32, u32)) -> Experiment {
        Experiment {
            name: name.into(),
            unit: "user_id".into(),
            variants: vec![("control".into(), 5000), ("treatment".into(), 10000)],
            salt: String::new(),
            layer: layer.map(Into::into),
            slots,
            interleave: None,
        }
    }

    #[test]
    fn assigns_by_bucket_layers_holdout_and_forcing() {
        let unit = vec![("user_id".to_string(), "u-1".to_string())];
        // antispam_v7:u-1 is bucket 8340: treatment.
        let a = assign(
            &[exp("antispam_v7", None, (0, 10000))],
            None,
            &unit,
            &[],
            None,
        );
        assert_eq!(
            a.variants,
            vec![("antispam_v7".to_string(), "treatment".to_string())]
        );
        assert_eq!(a.exposures[0].bucket, Some(8340));
        // layer ranking:u-1 is slot 8644: outside [0, 5000).
        let a = assign(
            &[exp("antispam_v7", Some("ranking"), (0, 5000))],
            None,
            &unit,
            &[],
            None,
        );
        assert!(a.variants.is_empty());
        // holdout:u-1 is bucket 354: held out with upper 1000, counted either way.
        let h = Holdout {
            unit: "user_id".into(),
            upper: 1000,
            salt: String::new(),
        };
        let a = assign(
            &[exp("antispam_v7", None, (0, 10000))],
            Some(&h),
            &unit,
            &[],
            None,
        );
        assert!(a.variants.is_empty());
        assert_eq!(
            a.counted,
            vec![("holdout".to_string(), "holdout".to_string())]
        );
        let forced = vec![("antispam_v7".to_string(), "control".to_string())];
        let a = assign(
            &[exp("antispam_v7", None, (0, 10000))],
            Some(&h),
            &unit,
            &forced,
            None,
        );
        assert_eq!(a.exposures[1].variant, "control");
        assert!(a.exposures[1].forced);
        assert_eq!(a.counted.len(), 1);
        assert!(assign::<String>(
            &[exp("antispam_v7", None, (0, 10000))],
            None,
            &[],
            &[],
            None
        )
        .exposures
        .is_empty());
    }

    #[test]
    fn forced_variants_are_checked() {
        let exps = [
            exp("a", Some("l"), (0, 5000)),
            exp("b", Some("l"), (5000, 10000)),
        ];
        let f = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert_eq!(
            check_forced(&exps, &f(&[("x", "control")])).unwrap_err(),
            "unknown experiment 'x' (running: a, b)"
        );
        assert_eq!(
            check_forced(&exps, &f(&[("a", "v")])).unwrap_err(),
            "experiment a has no variant 'v' (variants: control, treatment)"
        );
        assert_eq!(
            check_forced(&exps, &f(&[("a", "control"), ("b", "control")])).unwrap_err(),
            "a and b share layer l: a request is in one experiment per layer"
        );
    }
}
