//! Device sets: which devices a model may be placed on, how they are linked, and the host
//! memory tier (`models/devices/sets/*.json`, `--devices SET.json`, or the shorthand
//! `--device D --count N`).
//!
//! A set names device files (`models/devices/*.json`, paths relative to the set file) with
//! a count and the link domain the devices sit in (an NVLink domain, or a PCIe root). A
//! tensor-parallel group is formed within one domain and one device file; pipeline stages
//! may cross domains and device files. The host tier is the machine's memory that
//! offloaded weights live in. The shorthand's domain and host links are the device file's
//! own `links` ([`crate::synth::device_links::DeviceLinks`]); a set file states its own.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::synth::DeviceDescription;

use super::PlacementError;

pub use crate::synth::device_links::{Link, LinkKind};

/// A link domain: devices that talk over one link kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Domain {
    /// The domain's id (`node0.nvlink`).
    pub id: String,
    /// Its link.
    pub link: Link,
}

/// Devices of one file in one domain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceEntry {
    /// The device file, relative to the set file.
    pub file: PathBuf,
    /// How many such devices.
    pub count: u32,
    /// The domain they sit in (an id of `domains`).
    pub domain: String,
}

/// The host memory tier.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostTier {
    /// Host memory offloaded weights may take, bytes.
    pub memory_bytes: u64,
    /// The link from the host to each device.
    pub link: Link,
}

/// A device set file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSetFile {
    /// Human-readable name.
    pub name: String,
    /// The devices.
    pub devices: Vec<DeviceEntry>,
    /// The link domains the devices name.
    pub domains: Vec<Domain>,
    /// The link between domains, where there are several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interconnect: Option<Link>,
    /// The host memory tier, if offload may use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostTier>,
}

/// One kind of device of a set: a device description and where its devices sit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceKind {
    /// The file it was read from.
    pub file: PathBuf,
    /// Its description.
    pub description: DeviceDescription,
    /// Devices per domain, in domain order.
    pub per_domain: Vec<(String, u32)>,
}

/// A device set, read and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSet {
    /// The set's name.
    pub name: String,
    /// The file it was read from (`None`: built from `--device D --count N`).
    pub file: Option<PathBuf>,
    /// The kinds, in order of first appearance in the file.
    pub kinds: Vec<DeviceKind>,
    /// The domains with their links (empty for the shorthand of a device file without
    /// `links.peer`, whose one domain has no figures: memory-only placement reads none).
    pub domains: Vec<Domain>,
    /// The host tier's memory, bytes (`None`: the set has no host tier).
    pub host_memory_bytes: Option<u64>,
    /// The link between domains, where there are several.
    pub interconnect: Option<Link>,
    /// The host tier's link to each device.
    pub host_link: Option<Link>,
}

fn bad(file: &Path, json_path: &str, message: impl Into<String>) -> PlacementError {
    PlacementError::DeviceSet {
        file: file.display().to_string(),
        json_path: json_path.to_owned(),
        message: message.into(),
    }
}

fn check_link(file: &Path, path: &str, link: &Link) -> Result<(), PlacementError> {
    match link.problem() {
        Some((field, problem)) => Err(bad(file, &format!("{path}.{field}"), problem)),
        None => Ok(()),
    }
}

/// Which link a time objective found missing ([`DeviceSet::missing_link`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkRole {
    /// The link of a kind's tensor-parallel groups (a domain's link; a device file's
    /// `links.peer`).
    Peer,
    /// The host tier's link (a set's `host.link`; a device file's `links.host`).
    Host,
}

impl DeviceSet {
    /// Reads and validates a set file; every error names the file and the JSON path.
    pub fn read(file: &Path) -> Result<DeviceSet, PlacementError> {
        let parsed: DeviceSetFile =
            crate::request::read_json(file).map_err(|e| PlacementError::DeviceSetLoad {
                file: file.display().to_string(),
                message: e.to_string(),
            })?;
        let base = file.parent().unwrap_or(Path::new("."));
        Self::from_file(parsed, Some(file), base)
    }

    /// `count` devices of the file `device` on one domain, with `host_memory` bytes of host
    /// memory if given (the `--device D --count N` shorthand). The domain's link is the
    /// device file's `links.peer` (its id `nvlink.0`, `pcie.0`, ... by the link's kind;
    /// `nvlink.0` with no figures when the file states none: memory-only placement reads
    /// none), the host tier's link its `links.host`.
    pub fn uniform(
        device: &Path,
        count: u32,
        host_memory: Option<u64>,
    ) -> Result<DeviceSet, PlacementError> {
        let description = read_device(device, Path::new("--device"), "")?;
        Self::uniform_of(device, description, count, host_memory)
    }

    /// [`DeviceSet::uniform`] of a device description already read from `device`.
    pub fn uniform_of(
        device: &Path,
        description: DeviceDescription,
        count: u32,
        host_memory: Option<u64>,
    ) -> Result<DeviceSet, PlacementError> {
        if count == 0 {
            return Err(PlacementError::Usage(
                "--count 0: give at least one device".to_owned(),
            ));
        }
        let links = description.links.clone().unwrap_or_default();
        let (domain, domains) = match links.peer {
            Some(link) => {
                let id = format!("{}.0", link.kind.name());
                (id.clone(), vec![Domain { id, link }])
            }
            None => ("nvlink.0".to_owned(), Vec::new()),
        };
        Ok(DeviceSet {
            name: format!("{count} x {}", description.name),
            file: None,
            kinds: vec![DeviceKind {
                file: device.to_path_buf(),
                description,
                per_domain: vec![(domain.clone(), count)],
            }],
            domains,
            host_memory_bytes: host_memory,
            interconnect: None,
            host_link: links.host,
        })
    }

    fn from_file(
        parsed: DeviceSetFile,
        file: Option<&Path>,
        base: &Path,
    ) -> Result<DeviceSet, PlacementError> {
        let shown = file.unwrap_or(Path::new("(device set)"));
        if parsed.devices.is_empty() {
            return Err(bad(shown, ".devices", "lists no devices"));
        }
        let mut domain_ids = BTreeSet::new();
        for (i, domain) in parsed.domains.iter().enumerate() {
            if !domain_ids.insert(domain.id.as_str()) {
                return Err(bad(
                    shown,
                    &format!(".domains[{i}].id"),
                    format!("{} is listed twice", domain.id),
                ));
            }
            check_link(shown, &format!(".domains[{i}].link"), &domain.link)?;
        }
        if let Some(link) = &parsed.interconnect {
            check_link(shown, ".interconnect", link)?;
        }
        if let Some(host) = &parsed.host {
            check_link(shown, ".host.link", &host.link)?;
        }
        let mut kinds: Vec<DeviceKind> = Vec::new();
        for (i, entry) in parsed.devices.iter().enumerate() {
            let path = format!(".devices[{i}]");
            if entry.count == 0 {
                return Err(bad(shown, &format!("{path}.count"), "must be positive"));
            }
            if !domain_ids.contains(entry.domain.as_str()) {
                return Err(bad(
                    shown,
                    &format!("{path}.domain"),
                    format!("{} is not an id of .domains", entry.domain),
                ));
            }
            let device_file = base.join(&entry.file);
            let description = read_device(&device_file, shown, &format!("{path}.file"))?;
            match kinds.iter_mut().find(|k| k.file == device_file) {
                Some(kind) => match kind.per_domain.iter_mut().find(|(d, _)| *d == entry.domain) {
                    Some((_, n)) => {
                        *n = n.checked_add(entry.count).ok_or_else(|| {
                            bad(shown, &format!("{path}.count"), "too many devices")
                        })?
                    }
                    None => kind.per_domain.push((entry.domain.clone(), entry.count)),
                },
                None => kinds.push(DeviceKind {
                    file: device_file,
                    description,
                    per_domain: vec![(entry.domain.clone(), entry.count)],
                }),
            }
        }
        if domain_ids.len() > 1 && parsed.interconnect.is_none() {
            return Err(bad(
                shown,
                ".interconnect",
                "the set has several domains: give the link between them",
            ));
        }
        let backend = kinds[0].description.backend;
        if let Some(other) = kinds.iter().find(|k| k.description.backend != backend) {
            return Err(bad(
                shown,
                ".devices",
                format!(
                    "{} has backend {}, {} has {}: one set runs one backend",
                    other.file.display(),
                    other.description.backend.name(),
                    kinds[0].file.display(),
                    backend.name()
                ),
            ));
        }
        Ok(DeviceSet {
            name: parsed.name,
            file: file.map(Path::to_path_buf),
            kinds,
            domains: parsed.domains,
            host_memory_bytes: parsed.host.as_ref().map(|h| h.memory_bytes),
            interconnect: parsed.interconnect,
            host_link: parsed.host.map(|h| h.link),
        })
    }

    /// Every device in the set.
    pub fn device_count(&self) -> u64 {
        self.kinds
            .iter()
            .flat_map(|k| k.per_domain.iter())
            .map(|(_, n)| u64::from(*n))
            .sum()
    }

    /// The slowest link of the domains `kind`'s devices sit in (its tensor-parallel
    /// groups' link); `None` when the set has no link figures (the shorthand of a device
    /// file without `links.peer`).
    pub fn group_link(&self, kind: usize) -> Option<&Link> {
        self.kinds
            .get(kind)?
            .per_domain
            .iter()
            .filter_map(|(id, _)| self.domains.iter().find(|d| d.id == *id))
            .map(|d| &d.link)
            .min_by_key(|l| l.bandwidth_bytes_per_second)
    }

    /// The slowest link a stage boundary may cross: the interconnect, or the slowest
    /// domain's link; `None` without link figures.
    pub fn boundary_link(&self) -> Option<&Link> {
        self.domains
            .iter()
            .map(|d| &d.link)
            .chain(self.interconnect.as_ref())
            .min_by_key(|l| l.bandwidth_bytes_per_second)
    }

    /// Why a time objective or serving point cannot be priced on the set: the link of
    /// `role` (for `kind`'s devices) is not stated, and where to state it: a device file's
    /// `links` key for the `--device D --count N` shorthand, the set file's for a set.
    pub fn missing_link(&self, kind: usize, role: LinkRole) -> PlacementError {
        let (what, key) = match role {
            LinkRole::Peer => ("tensor-parallel groups' link", "peer"),
            LinkRole::Host => ("host link", "host"),
        };
        let example = match role {
            LinkRole::Peer => r#""peer": {"kind": "nvlink", "bandwidth_bytes_per_second": B}"#,
            LinkRole::Host => r#""host": {"kind": "pcie", "bandwidth_bytes_per_second": B}"#,
        };
        match &self.file {
            None => {
                let device = self
                    .kinds
                    .get(kind)
                    .map_or_else(|| "--device".to_owned(), |k| k.file.display().to_string());
                PlacementError::Usage(format!(
                    "{device}: a time objective or serving point on --device D --count N needs the {what}, and the device file states no `links.{key}`: add \"links\": {{{example}}} to it (B: bytes per second per direction per device, from the datasheet; docs/placement.md, \"Device files: links\"), or give --devices SET.json"
                ))
            }
            Some(file) => match role {
                LinkRole::Peer => bad(
                    file,
                    ".domains",
                    format!("a time objective or serving point needs the {what}: give the domain's link"),
                ),
                LinkRole::Host => bad(
                    file,
                    ".host",
                    "a time objective or serving point with host offload needs the host link: give the set a host tier {\"memory_bytes\": M, \"link\": {\"kind\": \"pcie\", \"bandwidth_bytes_per_second\": B}}",
                ),
            },
        }
    }

    /// Tensor-parallel groups of `degree` devices of `kind`: each within one domain.
    pub fn groups(&self, kind: usize, degree: u32) -> u32 {
        self.kinds.get(kind).map_or(0, |k| {
            k.per_domain.iter().map(|(_, n)| n / degree.max(1)).sum()
        })
    }
}

fn read_device(
    file: &Path,
    set: &Path,
    json_path: &str,
) -> Result<DeviceDescription, PlacementError> {
    DeviceDescription::read(file).map_err(|e| {
        let message = format!("device file {}: {e}", file.display());
        if json_path.is_empty() {
            PlacementError::Usage(message)
        } else {
            bad(set, json_path, message)
        }
    })
}
