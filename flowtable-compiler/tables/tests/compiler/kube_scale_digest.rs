//! The tables and the `explain` verdicts of a fixed generated cluster
//! (`benches/support/kube_cluster.rs`: 600 nodes, 90 Services, 10 endpoints each: subsets,
//! Local, internal, weighted, not-Ready and excluded nodes, terminating endpoints) must not
//! change when the compiler is made faster (SPEC R10.4: hosts with the same tables digest pick
//! the same backend for every flow).
//!
//! The expected digests were computed by the code before the issue-17 performance work
//! (commit 5cf5b60 of wip-k8sperf, the bench alone), with
//! `KUBE_SCALE=600,90,10 cargo bench -p flowtable-compiler --bench kube_scale`, which prints
//! both. A deliberate change of the tables or of the verdicts' words updates them, saying why.
//! `TABLES` changed once since: the `u280` profile grew to 64 Mi connections and 32 Mi Maglev
//! slots per bank (HBM), so the image's tables are larger; the verdicts stayed the same.
//!
//! Updated once on purpose since: Kubernetes Services became passthrough (new connections over
//! the healthy nodes alike instead of zone groups by member count, SPEC R7.1), NotReady nodes
//! stay backends of the NEG shapes (SPEC R7.6), subsets are divided over the zones smallest
//! first as GKE divides them (SPEC R7.5), and the verdicts say so.
//!
//! `TABLES` changed once more on purpose: a Maglev slice is at least 4093 slots (the size of
//! pools of up to 40 backends), so adding or removing a backend of such a pool moves only its
//! share of new flows (SPEC R3.2); the verdicts stayed the same.

#[path = "../../benches/support/kube_cluster.rs"]
mod kube_cluster;

use flowtable_compiler::{compile, CompileOptions, HealthState};
use nlb_config::kube::Source;
use nlb_config::parse_sources;
use nlb_hw::Profile;
use sha2::Digest as _;

const TABLES: &str = "7c5cbc1e5979a4e8586321d6b70ee8855c97e8788d1afbf53c005b7da9cdcaf3";
const VERDICTS: &str = "4c8f4f611ad38a2b5a8e36b916b46d3a5533ecede33de82091b50995ebafa879";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn generated_cluster_compiles_to_the_recorded_tables_and_verdicts() {
    let sources = [
        Source {
            name: "cluster.yaml".into(),
            text: kube_cluster::manifests(600, 90, 10),
        },
        Source {
            name: "project.yaml".into(),
            text: kube_cluster::project(),
        },
    ];
    let (config, diags) = parse_sources(&sources);
    assert!(diags.is_empty(), "{diags}");
    let profile = Profile::by_name("u280").expect("u280 profile");
    let compiled = compile(
        &config,
        &HealthState::default(),
        &CompileOptions { profile },
    )
    .expect("compiles");
    assert_eq!(hex(&compiled.tables_digest().expect("digest")), TABLES);

    let mut h = sha2::Sha256::new();
    let mut members = 0;
    for k in &config.kubernetes {
        for v in k.nodes() {
            members += usize::from(v.member);
            h.update(format!(
                "{}\t{}\t{}\t{}\t{}\t{:?}\n",
                k.service, v.node, v.zone, v.member, v.why, v.endpoints
            ));
        }
    }
    // The cluster exercises what it should: 90 Services over 600 nodes, subsets of 250.
    assert_eq!(config.kubernetes.len(), 90);
    assert!(members > 45 * 250, "{members} members");
    assert_eq!(hex(&h.finalize()), VERDICTS);
}
