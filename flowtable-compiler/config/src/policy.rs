//! The settings of a backend service's load-balancing policy as configured (SPEC R6), and where
//! the NIC stands among regions and zones. The decision that uses them is the table compiler's
//! (`flowtable_compiler::policy`).

/// How new connections are spread over regions and zones (`loadBalancingAlgorithm`, R6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Algorithm {
    /// Every group everywhere, in proportion to capacity.
    SprayToWorld,
    /// The nearest region first, its zones in proportion to capacity; spill by distance.
    SprayToRegion,
    /// The default: the nearest region first, in it the NIC's own zone first, then its other
    /// zones together in proportion to capacity; spill by distance.
    #[default]
    WaterfallByRegion,
    /// The NIC's own zone first, then the other zones of its region, then farther regions.
    WaterfallByZone,
}

impl Algorithm {
    /// The REST API name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::SprayToWorld => "SPRAY_TO_WORLD",
            Algorithm::SprayToRegion => "SPRAY_TO_REGION",
            Algorithm::WaterfallByRegion => "WATERFALL_BY_REGION",
            Algorithm::WaterfallByZone => "WATERFALL_BY_ZONE",
        }
    }
}

/// Traffic isolation (`isolationConfig` with granularity `REGION`, R6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// No isolation (no granularity set): spill across regions for capacity.
    #[default]
    None,
    /// Stay in the nearest region for capacity; leave it only when it has no healthy capacity.
    Nearest,
    /// Never leave the nearest region; drop instead.
    Strict,
}

/// Where the NIC is, and how far the regions are from it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Locality {
    /// The NIC's region.
    pub region: String,
    /// The NIC's zone.
    pub zone: String,
    /// Other regions, nearest first; regions not listed come after them, by name.
    pub region_order: Vec<String>,
}

impl Locality {
    /// Distance rank of a region: 0 for the NIC's own.
    pub fn region_rank(&self, region: &str) -> (usize, String) {
        if region == self.region {
            return (0, String::new());
        }
        match self.region_order.iter().position(|r| r == region) {
            Some(i) => (1 + i, String::new()),
            None => (1 + self.region_order.len(), region.to_string()),
        }
    }
}

/// `preference` of a backend (R6.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Preference {
    /// Filled to capacity before the others.
    Preferred,
    /// The rest.
    #[default]
    Default,
}
