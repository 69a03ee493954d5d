//! Compute Engine resource references as Google Cloud writes them: a short name (`web-pool`),
//! a partial path (`regions/us-central1/targetPools/web-pool`,
//! `projects/P/zones/us-central1-a/instances/web-1`) or a full URL
//! (`https://www.googleapis.com/compute/v1/projects/P/global/httpHealthChecks/web-check`,
//! also `compute/beta`, `compute/alpha` and the `compute.googleapis.com` host).
//!
//! Only the name identifies an object of the configuration (the project is not checked: one
//! file is one project); the collection must be the one the field takes, and the region or
//! zone is checked against the object by [`crate::gcp::check`].

use crate::model::Scope;

/// How a collection's paths are scoped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScopeKind {
    Global,
    Region,
    Zone,
    /// Global or regional (backend services, health checks).
    GlobalOrRegion,
}

/// A Compute Engine collection a reference may name: its path segment, how its paths are
/// scoped, and what it is called in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Collection {
    pub segment: &'static str,
    pub scope: ScopeKind,
    pub what: &'static str,
}

const fn col(segment: &'static str, scope: ScopeKind, what: &'static str) -> Collection {
    Collection {
        segment,
        scope,
        what,
    }
}

pub(crate) const TARGET_POOLS: Collection = col("targetPools", ScopeKind::Region, "target pool");
pub(crate) const TARGET_INSTANCES: Collection =
    col("targetInstances", ScopeKind::Zone, "target instance");
pub(crate) const INSTANCES: Collection = col("instances", ScopeKind::Zone, "instance");
pub(crate) const HTTP_HEALTH_CHECKS: Collection = col(
    "httpHealthChecks",
    ScopeKind::Global,
    "legacy HTTP health check",
);

pub(crate) const BACKEND_SERVICES: Collection = col(
    "backendServices",
    ScopeKind::GlobalOrRegion,
    "backend service",
);
pub(crate) const INSTANCE_GROUPS: Collection =
    col("instanceGroups", ScopeKind::Zone, "instance group");
pub(crate) const NETWORK_ENDPOINT_GROUPS: Collection = col(
    "networkEndpointGroups",
    ScopeKind::Zone,
    "network endpoint group",
);
pub(crate) const HEALTH_CHECKS: Collection =
    col("healthChecks", ScopeKind::GlobalOrRegion, "health check");

/// Collections recognised in paths, so a reference to the wrong kind of object can say what
/// it found. (The scope is not checked for collections no field takes.)
const KNOWN: &[Collection] = &[
    TARGET_POOLS,
    TARGET_INSTANCES,
    INSTANCES,
    HTTP_HEALTH_CHECKS,
    BACKEND_SERVICES,
    INSTANCE_GROUPS,
    NETWORK_ENDPOINT_GROUPS,
    HEALTH_CHECKS,
    col("forwardingRules", ScopeKind::Region, "forwarding rule"),
    col(
        "httpsHealthChecks",
        ScopeKind::Global,
        "legacy HTTPS health check",
    ),
    col("addresses", ScopeKind::Region, "address"),
    col("networks", ScopeKind::Global, "network"),
    col("subnetworks", ScopeKind::Region, "subnetwork"),
];

/// Hosts and the path prefix of Compute Engine resource URLs.
const URL_PREFIXES: &[&str] = &[
    "https://www.googleapis.com/compute/",
    "https://compute.googleapis.com/compute/",
];
const API_VERSIONS: &[&str] = &["v1", "beta", "alpha"];

/// A parsed reference or location path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourcePath<'t> {
    /// `global/`, `regions/R/` or `zones/Z/`, when the text had one.
    pub scope: Option<Scope>,
    /// The collection segment and the name after the scope, when the text had them.
    pub item: Option<(&'t str, &'t str)>,
    /// Whether the text was a bare name (no `/`).
    pub bare: bool,
}

/// Splits a path or URL into its scope and item. A bare name has neither; `item` holds it.
pub(crate) fn parse_path(text: &str) -> Result<ResourcePath<'_>, String> {
    let text = text.trim();
    if !text.contains('/') {
        return Ok(ResourcePath {
            scope: None,
            item: Some(("", text)),
            bare: true,
        });
    }
    let mut rest = text;
    let mut url = false;
    if text.contains("://") {
        let Some(after) = URL_PREFIXES.iter().find_map(|p| text.strip_prefix(p)) else {
            return Err(format!(
                "`{text}` is not a Compute Engine resource URL (they start with {})",
                URL_PREFIXES
                    .iter()
                    .map(|p| format!("{p}v1/"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        };
        let (version, after) = after.split_once('/').unwrap_or((after, ""));
        if !API_VERSIONS.contains(&version) {
            return Err(format!(
                "`{text}`: `{version}` is not a Compute Engine API version ({})",
                API_VERSIONS.join(", ")
            ));
        }
        rest = after;
        url = true;
    }
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(format!("`{text}` has an empty path segment"));
    }
    let mut s = &segments[..];
    if s.first() == Some(&"projects") {
        if s.len() < 2 {
            return Err(format!("`{text}` names no project after `projects/`"));
        }
        s = &s[2..];
    } else if url {
        return Err(format!(
            "`{text}`: a resource URL continues with `projects/PROJECT/` after the API version"
        ));
    }
    let scope = match s.first() {
        Some(&"global") => {
            s = &s[1..];
            Some(Scope::Global)
        }
        Some(&"regions") if s.len() >= 2 => {
            let r = s[1];
            s = &s[2..];
            Some(Scope::Region(r.to_string()))
        }
        Some(&"zones") if s.len() >= 2 => {
            let z = s[1];
            s = &s[2..];
            Some(Scope::Zone(z.to_string()))
        }
        _ => None,
    };
    let item = match s {
        [] => None,
        [c, n] => Some((*c, *n)),
        _ => {
            return Err(format!(
                "`{text}` is not a resource path: expected `global/`, `regions/REGION/` or `zones/ZONE/` followed by COLLECTION/NAME"
            ))
        }
    };
    if scope.is_none() && item.is_some() {
        return Err(format!(
            "`{text}` has no `global/`, `regions/REGION/` or `zones/ZONE/` before the collection"
        ));
    }
    if scope.is_none() && item.is_none() {
        return Err(format!("`{text}` names no resource"));
    }
    Ok(ResourcePath {
        scope,
        item,
        bare: false,
    })
}

/// A short example of each form a reference to `c` may take, for "valid:" lists.
pub(crate) fn forms(c: &Collection) -> String {
    let scope = match c.scope {
        ScopeKind::Global => "global".to_string(),
        ScopeKind::Region | ScopeKind::GlobalOrRegion => "regions/us-central1".to_string(),
        ScopeKind::Zone => "zones/us-central1-a".to_string(),
    };
    format!(
        "a name such as `NAME`, a path such as `{scope}/{}/NAME`, or a URL `https://www.googleapis.com/compute/v1/projects/PROJECT/{scope}/{}/NAME`",
        c.segment, c.segment
    )
}

/// What a reference to one of `want` found instead, or why it cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RefError {
    /// Not a name, path or URL.
    Syntax(String),
    /// A path to another collection: its segment and what it is called (if known).
    WrongCollection(String, Option<&'static str>),
    /// The right collection under the wrong kind of scope.
    WrongScope(&'static Collection),
}

/// A reference: the name, and the collection and scope its path named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedRef {
    pub name: String,
    pub collection: Option<&'static Collection>,
    pub scope: Option<Scope>,
}

/// Reads a reference to an object of one of the collections `want`.
pub(crate) fn parse_ref(text: &str, want: &'static [Collection]) -> Result<ParsedRef, RefError> {
    let p = parse_path(text).map_err(RefError::Syntax)?;
    let Some((segment, name)) = p.item else {
        return Err(RefError::Syntax(format!(
            "`{}` names a {} but no resource in it",
            text.trim(),
            match p.scope {
                Some(Scope::Zone(_)) => "zone",
                Some(Scope::Region(_)) => "region",
                _ => "scope",
            }
        )));
    };
    if p.bare {
        return Ok(ParsedRef {
            name: name.to_string(),
            collection: None,
            scope: None,
        });
    }
    let Some(c) = want.iter().find(|c| c.segment == segment) else {
        let what = KNOWN.iter().find(|c| c.segment == segment).map(|c| c.what);
        return Err(RefError::WrongCollection(segment.to_string(), what));
    };
    let scope_ok = matches!(
        (c.scope, &p.scope),
        (ScopeKind::Global, Some(Scope::Global))
            | (ScopeKind::Region, Some(Scope::Region(_)))
            | (ScopeKind::Zone, Some(Scope::Zone(_)))
            | (
                ScopeKind::GlobalOrRegion,
                Some(Scope::Global | Scope::Region(_))
            )
    );
    if !scope_ok {
        return Err(RefError::WrongScope(c));
    }
    Ok(ParsedRef {
        name: name.to_string(),
        collection: Some(c),
        scope: p.scope,
    })
}

/// Reads a `region` or `zone` field: a bare name, or a path or URL ending at the region or
/// zone (`regions/us-central1`, `https://.../projects/P/zones/us-central1-a`).
pub(crate) fn parse_location(text: &str, zone: bool) -> Result<String, String> {
    let (kind, example) = if zone {
        ("zone", "us-central1-a")
    } else {
        ("region", "us-central1")
    };
    let p = parse_path(text)?;
    let name = match (&p.scope, p.item) {
        (None, Some((_, n))) if p.bare => n,
        (Some(Scope::Zone(z)), None) if zone => z.as_str(),
        (Some(Scope::Region(r)), None) if !zone => r.as_str(),
        _ => {
            return Err(format!(
                "`{}` is not a {kind}: expected a {kind} name such as {example}, or its path or URL ending in `{kind}s/{example}`",
                text.trim()
            ))
        }
    };
    let ok = !name.is_empty()
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        return Err(format!(
            "`{name}` is not a {kind} name: lowercase letters, digits and '-', such as {example}"
        ));
    }
    Ok(name.to_string())
}

/// Hosts and prefixes of Network Services resource names (service LB policies).
const NETWORK_SERVICES_PREFIXES: &[&str] = &[
    "//networkservices.googleapis.com/",
    "https://networkservices.googleapis.com/v1/",
    "https://networkservices.googleapis.com/v1beta1/",
    "https://networkservices.googleapis.com/v1alpha1/",
];

/// A service LB policy's name or reference: `NAME`, `projects/P/locations/L/serviceLbPolicies/NAME`
/// (as `gcloud network-services service-lb-policies describe` prints `name`), or that path
/// behind `//networkservices.googleapis.com/` or the REST URL. Returns the short name and the
/// location, when the text had one.
pub(crate) fn parse_policy_name(text: &str) -> Result<(String, Option<String>), String> {
    let text = text.trim();
    let rest = NETWORK_SERVICES_PREFIXES
        .iter()
        .find_map(|p| text.strip_prefix(p))
        .unwrap_or(text);
    let segments: Vec<&str> = rest.split('/').collect();
    let bad = || {
        format!(
            "`{text}` is not a service LB policy: expected NAME or `projects/PROJECT/locations/LOCATION/serviceLbPolicies/NAME`"
        )
    };
    let (name, location) = match segments.as_slice() {
        [name] => (*name, None),
        ["projects", p, "locations", l, "serviceLbPolicies", name] if !p.is_empty() => {
            (*name, Some(l.to_string()))
        }
        ["locations", l, "serviceLbPolicies", name] => (*name, Some(l.to_string())),
        [.., c, _] if *c != "serviceLbPolicies" => {
            return Err(format!(
                "`{text}` names a `{c}`, not a service LB policy (`serviceLbPolicies`)"
            ))
        }
        _ => return Err(bad()),
    };
    if name.is_empty() || location.as_deref() == Some("") {
        return Err(bad());
    }
    Ok((name.to_string(), location))
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOLS: &[Collection] = &[TARGET_POOLS];
    const TARGETS: &[Collection] = &[TARGET_POOLS, TARGET_INSTANCES];

    #[test]
    fn every_reference_form_names_the_same_object() {
        for text in [
            "web-pool",
            "regions/us-central1/targetPools/web-pool",
            "projects/my-proj/regions/us-central1/targetPools/web-pool",
            "https://www.googleapis.com/compute/v1/projects/my-proj/regions/us-central1/targetPools/web-pool",
            "https://www.googleapis.com/compute/beta/projects/my-proj/regions/us-central1/targetPools/web-pool",
            "https://compute.googleapis.com/compute/alpha/projects/my-proj/regions/us-central1/targetPools/web-pool",
        ] {
            let r = parse_ref(text, POOLS).unwrap();
            assert_eq!(r.name, "web-pool", "{text}");
            if text != "web-pool" {
                assert_eq!(r.scope, Some(Scope::Region("us-central1".into())), "{text}");
                assert_eq!(r.collection, Some(&TARGET_POOLS), "{text}");
            }
        }
        let r = parse_ref("zones/europe-west1-b/instances/vm-1", &[INSTANCES]).unwrap();
        assert_eq!(
            (r.name.as_str(), r.scope),
            ("vm-1", Some(Scope::Zone("europe-west1-b".into())))
        );
        let r = parse_ref(
            "https://www.googleapis.com/compute/v1/projects/p/global/httpHealthChecks/hc",
            &[HTTP_HEALTH_CHECKS],
        )
        .unwrap();
        assert_eq!((r.name.as_str(), r.scope), ("hc", Some(Scope::Global)));
    }

    #[test]
    fn wrong_collections_and_scopes_say_what_they_found() {
        assert_eq!(
            parse_ref("zones/us-central1-a/targetInstances/ti", POOLS),
            Err(RefError::WrongCollection(
                "targetInstances".into(),
                Some("target instance")
            ))
        );
        assert!(parse_ref("zones/us-central1-a/targetInstances/ti", TARGETS).is_ok());
        assert_eq!(
            parse_ref("global/widgets/w", POOLS),
            Err(RefError::WrongCollection("widgets".into(), None))
        );
        assert_eq!(
            parse_ref("zones/us-central1-a/targetPools/p", POOLS),
            Err(RefError::WrongScope(&TARGET_POOLS))
        );
    }

    #[test]
    fn malformed_paths_are_refused() {
        for text in [
            "https://example.com/compute/v1/projects/p/regions/r/targetPools/x",
            "https://www.googleapis.com/compute/v2/projects/p/regions/r/targetPools/x",
            "https://www.googleapis.com/compute/v1/regions/r/targetPools/x",
            "regions/r/targetPools/x/extra",
            "targetPools/x",
            "regions//targetPools/x",
            "regions/r/targetPools/x/",
            "projects/",
            "regions/us-central1",
        ] {
            assert!(
                matches!(parse_ref(text, POOLS), Err(RefError::Syntax(_))),
                "{text}: {:?}",
                parse_ref(text, POOLS)
            );
        }
    }

    #[test]
    fn locations_hand_worked() {
        assert_eq!(parse_location("us-central1", false).unwrap(), "us-central1");
        assert_eq!(
            parse_location(
                "https://www.googleapis.com/compute/v1/projects/p/regions/us-central1",
                false
            )
            .unwrap(),
            "us-central1"
        );
        assert_eq!(
            parse_location("projects/p/zones/us-central1-f", true).unwrap(),
            "us-central1-f"
        );
        assert_eq!(parse_location("zones/lab-a", true).unwrap(), "lab-a");
        // A zone where a region is wanted, and the other way round.
        assert!(parse_location("zones/us-central1-a", false).is_err());
        assert!(parse_location("regions/us-central1", true).is_err());
        assert!(parse_location("US-Central1", false).is_err());
        assert!(parse_location("regions/us-central1/targetPools/p", false).is_err());
    }
}
