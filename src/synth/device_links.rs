//! Links: how a device talks to its peers and to the host. A device set file
//! (`models/devices/sets/*.json`) states them per domain and for its host tier; a device
//! file may state its own (`links`), which the `--device D --count N` shorthand uses for its
//! N devices (docs/placement.md, "Device files: links"). Links price the time objectives
//! of a placement only: never copied into a synthesized request.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The kind of a link.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// NVLink (through NVSwitch or direct bridges): every pair of the domain's devices.
    Nvlink,
    /// PCIe through the host's root complex.
    Pcie,
    /// A network between domains (InfiniBand, RoCE).
    Network,
}

impl LinkKind {
    /// The kind as the files spell it (`nvlink`, `pcie`, `network`).
    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Nvlink => "nvlink",
            LinkKind::Pcie => "pcie",
            LinkKind::Network => "network",
        }
    }
}

/// A link: its kind, bandwidth and latency.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// The link's kind.
    pub kind: LinkKind,
    /// Bandwidth per direction per device, bytes per second.
    pub bandwidth_bytes_per_second: u64,
    /// One-way latency in nanoseconds, where a source gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<u64>,
}

impl Link {
    /// What is wrong with the link's figures, as `(field, problem)` (the field relative to
    /// the link), or `None`.
    pub fn problem(&self) -> Option<(&'static str, &'static str)> {
        if self.bandwidth_bytes_per_second == 0 {
            return Some((
                "bandwidth_bytes_per_second",
                "must be positive (bytes per second per direction per device)",
            ));
        }
        if self.latency_ns == Some(0) {
            return Some((
                "latency_ns",
                "must be positive (omit it where no source gives one)",
            ));
        }
        None
    }
}

/// A device file's links (`links`): to its peers and to the host.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeviceLinks {
    /// The link between two such devices in one machine (NVLink through NVSwitch, or PCIe
    /// for a device without NVLink): the domain of `--device D --count N`; absent for a
    /// device that is never grouped with others (it still places at `--count 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<Link>,
    /// The link from host memory to one device (its PCIe slot): the host tier's link of
    /// `--device D --count N --host-memory BYTES`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Link>,
}

impl DeviceLinks {
    /// What is wrong with the links, as `(field, problem)` with the field's path under
    /// `links` (`links.peer.bandwidth_bytes_per_second`), or `None`.
    pub fn problem(&self) -> Option<(String, &'static str)> {
        [("peer", &self.peer), ("host", &self.host)]
            .into_iter()
            .find_map(|(name, link)| {
                let (field, problem) = link.as_ref()?.problem()?;
                Some((format!("links.{name}.{field}"), problem))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_figure_names_its_path() {
        let links: DeviceLinks = serde_json::from_value(serde_json::json!({
            "peer": {"kind": "nvlink", "bandwidth_bytes_per_second": 300000000000u64},
            "host": {"kind": "pcie", "bandwidth_bytes_per_second": 0}
        }))
        .unwrap();
        assert_eq!(
            links.problem().map(|(f, _)| f),
            Some("links.host.bandwidth_bytes_per_second".to_owned())
        );
        let links: DeviceLinks = serde_json::from_value(serde_json::json!({
            "peer": {"kind": "pcie", "bandwidth_bytes_per_second": 1, "latency_ns": 0}
        }))
        .unwrap();
        assert_eq!(
            links.problem().map(|(f, _)| f),
            Some("links.peer.latency_ns".to_owned())
        );
    }

    #[test]
    fn unknown_keys_are_refused() {
        let parsed: Result<DeviceLinks, _> = serde_json::from_value(serde_json::json!({
            "peers": {"kind": "nvlink", "bandwidth_bytes_per_second": 1}
        }));
        assert!(parsed.is_err());
    }
}
