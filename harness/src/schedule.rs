//! Which scenarios run at the same time, and where: `faultlab run --jobs N`.
//!
//! Each scenario claims what its fault reaches ([`Scope`]) and the host ports its helpers listen on
//! (a run's registry). The places are the nodes of one shared cluster (the test bed: every scenario on
//! the same cluster, each on a node) or clusters of their own (kind: a place is a slot for one cluster,
//! one scenario at a time on it). The rules:
//! - a namespace-only scenario runs beside anything, on a node no node-wide scenario is breaking;
//! - a node-wide scenario has a node to itself;
//! - a scenario that fails its node holds two: its own and the one its workload moves to (the node
//!   lifecycle controller evicts only from the failed node). Beside it only as many other node-wide
//!   scenarios run as keep the zone's nodes that may be not Ready within [`not_ready_allowed`]:
//!   Kubernetes 1.20's node lifecycle controller stops tainting and evicting in a zone where more than
//!   two nodes, and at least 55 % of them, are not Ready (`ComputeZoneState`; in a cluster of up to 50
//!   nodes the reduced rate is 0), and a node-wide fault may make its node so. One beside it on up to 5
//!   nodes, two on 6 or 7, three on 8;
//! - a cluster-wide scenario runs alone on a shared cluster, and beside others on a cluster of its own;
//! - a host-wide scenario (one limit of the kernel every node shares) runs alone, everywhere;
//! - a scenario whose fault fills a disk that is a file on this machine's disk (the disk faults:
//!   containerd's disk is a loop file here, on kind and on the test bed) is node-wide, and no two such
//!   run at once ([`Claim::host_disk`]);
//! - two scenarios that listen on the same host port never run at once, unless each listens on its own
//!   node's registry address and those differ (the test bed's nodes each have one);
//! - scenarios start in the order given, except that one waiting for a place or a port lets those after
//!   it go first; one that must run alone waits for the others to end, and nothing after it starts
//!   before it has (so it is never starved).
//!
//! Pure data: no cluster, no clock. The runner asks [`Scheduler::next`] what to start whenever one ends.

/// How far a scenario's fault reaches (the fault's `Reach`, as the scheduler needs it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Namespace,
    Node,
    /// Its node fails (is not Ready for minutes) and its workload moves to a second node, which it
    /// holds too on a shared cluster.
    NodeFailure,
    Cluster,
    Host,
}

/// A port of this machine a scenario's helper listens on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostPort {
    pub port: u16,
    /// On the address of the scenario's node's registry (the host's end of that node's link), not on
    /// one address for all (127.0.0.1).
    pub on_node_address: bool,
}

/// What a scenario holds while it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub scope: Scope,
    /// Ports of this machine its helpers listen on.
    pub host_ports: Vec<HostPort>,
    /// It writes a file of bounded size to this machine's disk after checking the free space: no other
    /// such scenario runs beside it, so none fills the disk between its check and its writes (between
    /// processes, the machine lock's `host-disk.lock` does the same).
    pub host_disk: bool,
    /// On clusters of their own: scenarios with the same key can use one cluster one after another
    /// (kind's needs); the scheduler gives a free slot the scenario that needs no new cluster first.
    pub cluster_key: String,
    /// How long the scenario may take by its own deadlines (the symptom's and the recovery's): the
    /// longest are offered first, so that what waits on documented timings (a back-off, a pull's
    /// progress deadline) does not start last and hold the batch's end.
    pub budget: std::time::Duration,
}

/// A node of a shared cluster, as the scheduler knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePlace {
    pub name: String,
    /// The host address its registries listen on, if it has one.
    pub registry_address: Option<String>,
}

impl NodePlace {
    pub fn named(name: &str) -> NodePlace {
        NodePlace { name: name.into(), registry_address: None }
    }
}

/// Where scenarios run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Places {
    /// The nodes of one shared cluster.
    Nodes(Vec<NodePlace>),
    /// This many clusters of their own, at once.
    Clusters(usize),
}

/// On clusters of their own: a second cluster of one group (the same [`Claim::cluster_key`]) is made
/// only when at least this many of the group wait; fewer wait for the group's cluster in its slot.
/// Measured on kind with CI's test bed beside it (2 cores, 2026-11-29): a cluster costs 67-87 s to make
/// and a scenario 60-90 s on it. In one run, pause-missing took a second cluster of its group while
/// cpu-count ran on the first, for 2 scenarios more; the plain cluster its slot held was deleted for it,
/// and inotify-limit, last, made a plain one again: 6 clusters for 24 scenarios where 4 did in the run
/// before. With 3 waiting, a second cluster gains about the time of one scenario and costs one
/// cluster's making, and often another's later; with 4 it gains two.
pub const SECOND_CLUSTER_AT: usize = 4;

/// How many of a zone's `nodes` nodes may be not Ready at once while Kubernetes 1.20's node lifecycle
/// controller still taints and evicts there at its normal rate. Its `ComputeZoneState` calls a zone fully
/// disrupted when none of its nodes is Ready, and partially disrupted when more than two are not Ready and
/// they are at least `--unhealthy-zone-threshold` of it (0.55, the default the test bed keeps); in a
/// cluster of up to 50 nodes (`--large-cluster-size-threshold`) a partially disrupted zone's rate is 0.
/// The test bed's nodes carry no zone label: they are one zone. 2 of 3 to 5 nodes, 3 of 6 or 7, 4 of 8.
pub fn not_ready_allowed(nodes: usize) -> usize {
    // 55 % in whole numbers: n / nodes >= 0.55 as 100 n >= 55 nodes (float32's 0.55 is a hair above,
    // which no ratio of two counts up to 16 falls between).
    (0..nodes).rev().find(|&n| n <= 2 || 100 * n < 55 * nodes).unwrap_or(0)
}

/// Start the `pending`-th waiting scenario on `place` (an index into the nodes, or a cluster slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Start {
    pub pending: usize,
    pub place: usize,
}

#[derive(Clone, Debug)]
struct Running {
    id: usize,
    place: usize,
    /// The second place a [`Scope::NodeFailure`] holds: where its workload moves.
    spare: Option<usize>,
    claim: Claim,
}

/// The scenarios running now, and on a cluster slot the key of the cluster it last had.
#[derive(Clone, Debug)]
pub struct Scheduler {
    places: Places,
    jobs: usize,
    running: Vec<Running>,
    last_key: Vec<Option<String>>,
    /// On clusters of their own: a slot keeps its cluster for the next scenario of its group (kind's
    /// shared clusters), so a group's second cluster waits for enough of it ([`SECOND_CLUSTER_AT`]).
    keeps_clusters: bool,
}

impl Scheduler {
    /// At most `jobs` (at least 1) at once; on clusters of their own, as many slots as jobs.
    pub fn new(places: Places, jobs: usize) -> Scheduler {
        let jobs = jobs.max(1);
        let places = match places {
            Places::Clusters(_) => Places::Clusters(jobs),
            Places::Nodes(n) if n.is_empty() => Places::Nodes(vec![NodePlace::named("")]),
            nodes => nodes,
        };
        let count = match &places {
            Places::Nodes(n) => n.len(),
            Places::Clusters(c) => *c,
        };
        Scheduler { places, jobs, running: Vec::new(), last_key: vec![None; count], keeps_clusters: false }
    }

    /// With `keeps`, the cluster slots keep their clusters between scenarios of a group (kind's shared
    /// clusters); without, every scenario has a cluster made for it and none waits for another's.
    pub fn keeping_clusters(mut self, keeps: bool) -> Scheduler {
        self.keeps_clusters = keeps;
        self
    }

    /// The node named by `place` (shared cluster), if the places are nodes and it has a name (a
    /// description that could not be read gives one place of no name).
    pub fn node(&self, place: usize) -> Option<&str> {
        match &self.places {
            Places::Nodes(n) => n.get(place).map(|p| p.name.as_str()).filter(|n| !n.is_empty()),
            Places::Clusters(_) => None,
        }
    }

    /// Whether `claim` must run with nothing beside it.
    fn alone(&self, claim: &Claim) -> bool {
        match claim.scope {
            Scope::Host => true,
            Scope::Cluster => matches!(self.places, Places::Nodes(_)),
            Scope::Namespace | Scope::Node | Scope::NodeFailure => false,
        }
    }

    fn busy(&self, place: usize) -> impl Iterator<Item = &Running> {
        self.running.iter().filter(move |r| r.place == place || r.spare == Some(place))
    }

    /// On a shared cluster's nodes, whether `claim` keeps the nodes that may be not Ready at once within
    /// [`not_ready_allowed`] while a node fails: a [`Scope::NodeFailure`] starts beside no other failure
    /// and so few node-wide scenarios that its own node makes no more than that, and while one runs, a
    /// node-wide scenario starts only within it too. Without a failure, node-wide ones are not counted:
    /// no run then waits on an eviction.
    fn zone_allows(&self, claim: &Claim) -> bool {
        let Places::Nodes(nodes) = &self.places else {
            return true;
        };
        // (On one node a failure's run refuses the cluster itself: not the scheduler's to say.)
        let allowed = not_ready_allowed(nodes.len()).max(1);
        let count = |scope: Scope| self.running.iter().filter(|r| r.claim.scope == scope).count();
        let (failures, node_wide) = (count(Scope::NodeFailure), count(Scope::Node));
        match claim.scope {
            Scope::NodeFailure => failures == 0 && node_wide < allowed,
            Scope::Node => failures == 0 || failures + node_wide < allowed,
            _ => true,
        }
    }

    /// The free place other than `place` a [`Scope::NodeFailure`] there holds too (none on clusters of
    /// their own, or with one node: its run then refuses the cluster itself).
    fn spare_for(&self, place: usize) -> Option<usize> {
        match &self.places {
            Places::Nodes(n) => (0..n.len()).find(|&p| p != place && self.busy(p).next().is_none()),
            Places::Clusters(_) => None,
        }
    }

    /// The places `claim` may start on now (the alone rule aside), the best first.
    fn place_for(&self, claim: &Claim) -> Option<usize> {
        let count = self.last_key.len();
        let mut order: Vec<usize> = match (&self.places, claim.scope) {
            (Places::Nodes(_), Scope::Namespace) => {
                let mut ok: Vec<usize> = (0..count).filter(|&p| self.busy(p).all(|r| r.claim.scope == Scope::Namespace)).collect();
                ok.sort_by_key(|&p| self.busy(p).count());
                ok
            }
            (Places::Nodes(_), Scope::NodeFailure) if count > 1 => (0..count).filter(|&p| self.busy(p).next().is_none() && self.spare_for(p).is_some()).collect(),
            (Places::Nodes(_), _) => (0..count).filter(|&p| self.busy(p).next().is_none()).collect(),
            (Places::Clusters(_), _) => {
                // The slot whose cluster it can use as it is, then one with no cluster yet, then any.
                let mut free: Vec<usize> = (0..count).filter(|&p| self.busy(p).next().is_none()).collect();
                free.sort_by_key(|&p| match self.last_key[p].as_deref() {
                    Some(k) if k == claim.cluster_key => 0,
                    None => 1,
                    Some(_) => 2,
                });
                free
            }
        };
        order.retain(|&p| self.ports_free(claim, p));
        if claim.host_disk && self.running.iter().any(|r| r.claim.host_disk) {
            return None;
        }
        order.first().copied().filter(|_| self.zone_allows(claim))
    }

    /// The host address a port on the node's address is at, for `place`.
    fn address(&self, place: usize) -> Option<&str> {
        match &self.places {
            Places::Nodes(n) => n.get(place).and_then(|p| p.registry_address.as_deref()),
            Places::Clusters(_) => None,
        }
    }

    /// Whether `claim` on `place` listens on no port a running scenario listens on.
    fn ports_free(&self, claim: &Claim, place: usize) -> bool {
        !self.running.iter().any(|r| {
            claim.host_ports.iter().any(|a| {
                r.claim.host_ports.iter().any(|b| {
                    let apart = a.on_node_address && b.on_node_address && matches!((self.address(place), self.address(r.place)), (Some(x), Some(y)) if x != y);
                    a.port == b.port && !apart
                })
            })
        })
    }

    /// The order to offer `claims` in (indices): those that must run alone on a shared cluster first, then
    /// the rest, the longest [`Claim::budget`] first, ties in their own order, and host-wide ones last.
    /// One that must run alone waits for everything running to end, and nothing passes it; among the
    /// others, each such wait drains the places while the longest running one finishes. At the start
    /// nothing runs, so they cost only their own time there. Then the long ones start while every place
    /// is free: one that started last would hold the batch's end by its whole length (image-pull-slow
    /// did, for 180 s of a 514 s side-by-side run on the test bed). A host-wide one also waits for every
    /// other faultlab process on this machine to end what it runs (the machine's host lock), and holds
    /// every place here while it waits: at the start, another process is most likely in full swing (CI's
    /// kind suite beside the test bed's: the test bed's scenarios took 891 s instead of 688 so, and a
    /// kind run that went first waited 374.6 s for the test bed's runs, its own places idle and the test bed's new runs queued behind it); at
    /// the end, most of this process's work is done, and the other's more likely too. With one job the
    /// order stays as given.
    pub fn order(&self, claims: &[Claim]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..claims.len()).collect();
        if self.jobs > 1 {
            let group = |c: &Claim| match c.scope {
                Scope::Host => 2,
                _ if self.alone(c) => 0,
                _ => 1,
            };
            order.sort_by_key(|&i| (group(&claims[i]), std::cmp::Reverse(claims[i].budget)));
        }
        order
    }

    /// What to start now of `pending` (in their order), if anything may start.
    pub fn next(&self, pending: &[&Claim]) -> Option<Start> {
        if pending.is_empty() || self.running.len() >= self.jobs || self.running.iter().any(|r| self.alone(&r.claim)) {
            return None;
        }
        // Up to the first one that must run alone: a barrier for those after it.
        let end = pending.iter().position(|c| self.alone(c)).unwrap_or(pending.len());
        if end == 0 {
            return match self.running.is_empty() {
                true => self.place_for(pending[0]).map(|place| Start { pending: 0, place }),
                false => None,
            };
        }
        let startable = |i: usize| -> Option<Start> { self.place_for(pending[i]).map(|place| Start { pending: i, place }) };
        if let Places::Clusters(_) = self.places {
            // First, one that can use a free slot's cluster as it is.
            let reuse = (0..end).find_map(|i| startable(i).filter(|s| self.last_key[s.place].as_deref() == Some(pending[i].cluster_key.as_str())));
            if reuse.is_some() {
                return reuse;
            }
            // Then one whose group's cluster is not busy in another slot, or that has enough waiting
            // for a second one.
            return (0..end).filter(|&i| !self.waits_for_its_cluster(pending, i)).find_map(startable);
        }
        (0..end).find_map(startable)
    }

    /// On clusters of their own, whether `pending[i]`, which would need a new cluster, waits instead for
    /// its group's, which a running scenario holds: fewer than [`SECOND_CLUSTER_AT`] of the group wait.
    fn waits_for_its_cluster(&self, pending: &[&Claim], i: usize) -> bool {
        if !self.keeps_clusters {
            return false;
        }
        let key = pending[i].cluster_key.as_str();
        let held = self.running.iter().any(|r| self.last_key.get(r.place).and_then(|k| k.as_deref()) == Some(key));
        held && pending.iter().filter(|c| c.cluster_key == key).count() < SECOND_CLUSTER_AT
    }

    /// `id` starts on `place` with `claim`.
    pub fn start(&mut self, id: usize, place: usize, claim: Claim) {
        if let Some(k) = self.last_key.get_mut(place) {
            *k = Some(claim.cluster_key.clone());
        }
        let spare = match claim.scope {
            Scope::NodeFailure => self.spare_for(place),
            _ => None,
        };
        self.running.push(Running { id, place, spare, claim });
    }

    /// The node `id` holds besides its own (a [`Scope::NodeFailure`]'s, on a shared cluster's nodes),
    /// by name.
    pub fn spare_node(&self, id: usize) -> Option<&str> {
        let spare = self.running.iter().find(|r| r.id == id)?.spare?;
        self.node(spare)
    }

    /// `id` has ended.
    pub fn finish(&mut self, id: usize) {
        self.running.retain(|r| r.id != id);
    }

    /// The ids running now.
    pub fn running(&self) -> Vec<usize> {
        self.running.iter().map(|r| r.id).collect()
    }
}

/// A [`Scheduler`] for threads that each run one scenario (the test harness's trials): a thread asks
/// for a place with [`Slots::acquire`], which blocks until the rules let it start, and gives it back by
/// dropping the [`Lease`]. They are taken in the order of their ids, which is the scheduler's order
/// ([`Scheduler::order`]), not in the order their threads reach the lock: the test harness's threads
/// take the trials in order but race to ask, and a cluster-wide scenario that asked after a node's
/// failure had started then waited out the failure's 7 minutes with every other place idle behind it
/// (CI, 2026-11-29). So none starts before every id in front of it among those expected has asked.
pub struct Slots {
    state: std::sync::Mutex<Asking>,
    changed: std::sync::Condvar,
}

/// What [`Slots`] guards.
struct Asking {
    scheduler: Scheduler,
    /// Those waiting for a place, by id.
    waiting: Vec<(usize, Claim)>,
    /// The ids that will ask, in order.
    expected: Vec<usize>,
    /// The ids that have asked.
    asked: std::collections::BTreeSet<usize>,
}

impl Asking {
    /// Which waiting id may start now, and where: of those waiting, only the ones in front of the first
    /// expected id that has not asked yet.
    fn next(&self) -> Option<(usize, Start)> {
        let cut = match self.expected.iter().find(|i| !self.asked.contains(i)) {
            Some(missing) => self.waiting.partition_point(|(i, _)| i < missing),
            None => self.waiting.len(),
        };
        let claims: Vec<&Claim> = self.waiting[..cut].iter().map(|(_, c)| c).collect();
        self.scheduler.next(&claims).map(|start| (self.waiting[start.pending].0, start))
    }

    /// `id` asks for a place with `claim`.
    fn ask(&mut self, id: usize, claim: Claim) {
        self.asked.insert(id);
        let at = self.waiting.partition_point(|(i, _)| *i < id);
        self.waiting.insert(at, (id, claim));
    }
}

/// A place held; dropped, it is free again.
pub struct Lease<'a> {
    slots: &'a Slots,
    id: usize,
    /// The node (a shared cluster's), if the places are nodes and it has a name.
    pub node: Option<String>,
    /// The ids that were running when this one started.
    pub beside: Vec<usize>,
    /// The second node a node's failure holds, where its workload moves ([`Scheduler::spare_node`]).
    pub spare: Option<String>,
}

impl Slots {
    /// Slots for the callers with ids `expected` (each asks once; an id not in it may ask too, and is
    /// taken in its place among them).
    pub fn new(scheduler: Scheduler, expected: impl IntoIterator<Item = usize>) -> Slots {
        let mut expected: Vec<usize> = expected.into_iter().collect();
        expected.sort_unstable();
        let asking = Asking { scheduler, waiting: Vec::new(), expected, asked: Default::default() };
        Slots { state: std::sync::Mutex::new(asking), changed: std::sync::Condvar::new() }
    }

    /// Wait until `id` may start with `claim`; `id` is unique among the callers.
    pub fn acquire(&self, id: usize, claim: Claim) -> Lease<'_> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.ask(id, claim);
        // Another waiting thread may be able to start now that this one has asked.
        self.changed.notify_all();
        loop {
            if let Some((who, start)) = state.next() {
                if who == id {
                    let (_, claim) = state.waiting.remove(start.pending);
                    let sched = &mut state.scheduler;
                    let beside = sched.running();
                    sched.start(id, start.place, claim);
                    let node = sched.node(start.place).map(String::from);
                    let spare = sched.spare_node(id).map(String::from);
                    // Another waiting thread may be able to start too.
                    self.changed.notify_all();
                    return Lease { slots: self, id, node, beside, spare };
                }
                // Someone else's turn: let them see it.
                self.changed.notify_all();
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let mut state = self.slots.state.lock().unwrap_or_else(|e| e.into_inner());
        state.scheduler.finish(self.id);
        self.slots.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(scope: Scope) -> Claim {
        Claim { scope, host_ports: vec![], host_disk: false, cluster_key: "default".into(), budget: std::time::Duration::ZERO }
    }

    fn nodes(n: usize) -> Places {
        Places::Nodes((1..=n).map(|i| NodePlace::named(&format!("node-{i}"))).collect())
    }

    /// Start everything startable now, in order, as the runner does; the (pending index, place) pairs.
    fn fill(s: &mut Scheduler, pending: &mut Vec<(usize, Claim)>) -> Vec<(usize, usize)> {
        let mut started = vec![];
        loop {
            let claims: Vec<&Claim> = pending.iter().map(|(_, c)| c).collect();
            let Some(start) = s.next(&claims) else { break };
            let (id, c) = pending.remove(start.pending);
            s.start(id, start.place, c);
            started.push((id, start.place));
        }
        started
    }

    #[test]
    fn node_wide_scenarios_each_get_a_node_and_wait_for_one() {
        let mut s = Scheduler::new(nodes(2), 4);
        let mut pending: Vec<(usize, Claim)> = (0..3).map(|i| (i, claim(Scope::Node))).collect();
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 1)]);
        s.finish(1);
        assert_eq!(fill(&mut s, &mut pending), [(2, 1)], "the freed node");
        assert!(pending.is_empty());
    }

    #[test]
    fn namespace_scenarios_share_nodes_no_node_wide_scenario_breaks() {
        let mut s = Scheduler::new(nodes(2), 8);
        let mut pending = vec![(0, claim(Scope::Node)), (1, claim(Scope::Namespace)), (2, claim(Scope::Namespace)), (3, claim(Scope::Node))];
        // The node-wide one takes node 0; both namespace ones go to node 1; the last node-wide one waits.
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 1), (2, 1)]);
        s.finish(0);
        assert_eq!(fill(&mut s, &mut pending), [(3, 0)]);
    }

    #[test]
    fn on_one_node_only_namespace_scenarios_run_side_by_side() {
        let mut s = Scheduler::new(nodes(1), 4);
        let mut pending = vec![(0, claim(Scope::Namespace)), (1, claim(Scope::Node)), (2, claim(Scope::Namespace))];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (2, 0)], "the node-wide one waits; the one after it may go first");
        s.finish(0);
        assert_eq!(fill(&mut s, &mut pending), []);
        s.finish(2);
        assert_eq!(fill(&mut s, &mut pending), [(1, 0)]);
    }

    #[test]
    fn cluster_and_host_wide_scenarios_run_alone_and_are_not_overtaken() {
        let mut s = Scheduler::new(nodes(3), 3);
        let mut pending = vec![(0, claim(Scope::Node)), (1, claim(Scope::Cluster)), (2, claim(Scope::Namespace))];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0)], "nothing passes the one that must run alone");
        s.finish(0);
        assert_eq!(fill(&mut s, &mut pending), [(1, 0)]);
        assert_eq!(fill(&mut s, &mut pending), [], "nothing beside it");
        s.finish(1);
        assert_eq!(fill(&mut s, &mut pending), [(2, 0)]);
        let mut s = Scheduler::new(Places::Clusters(2), 2);
        let mut pending = vec![(0, claim(Scope::Cluster)), (1, claim(Scope::Cluster)), (2, claim(Scope::Host)), (3, claim(Scope::Node))];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 1)], "cluster-wide on clusters of their own run side by side");
        s.finish(0);
        assert_eq!(fill(&mut s, &mut pending), [], "host-wide waits for every cluster");
        s.finish(1);
        assert_eq!(fill(&mut s, &mut pending), [(2, 0)]);
        assert_eq!(fill(&mut s, &mut pending), []);
    }

    #[test]
    fn cluster_wide_ones_are_offered_first_and_host_wide_ones_last_when_several_may_run() {
        let claims = [claim(Scope::Node), claim(Scope::Cluster), claim(Scope::Namespace), claim(Scope::Host), claim(Scope::Node)];
        assert_eq!(Scheduler::new(nodes(3), 6).order(&claims), [1, 0, 2, 4, 3], "cluster-wide first, host-wide last, each group in its order");
        assert_eq!(Scheduler::new(nodes(3), 1).order(&claims), [0, 1, 2, 3, 4], "one after the other: as given");
        // On kind, cluster-wide ones each have a cluster of their own: none goes first.
        assert_eq!(Scheduler::new(Places::Clusters(2), 2).order(&claims), [0, 1, 2, 4, 3]);
    }

    #[test]
    fn a_host_wide_one_goes_last_and_still_runs_alone() {
        let with = |scope, secs| Claim { budget: std::time::Duration::from_secs(secs), ..claim(scope) };
        let claims = [with(Scope::Host, 60), with(Scope::Node, 300), with(Scope::Cluster, 30), with(Scope::Namespace, 420)];
        assert_eq!(Scheduler::new(nodes(3), 3).order(&claims), [2, 3, 1, 0], "cluster-wide first, host-wide last");
        assert_eq!(Scheduler::new(Places::Clusters(2), 2).order(&claims), [3, 1, 2, 0]);
        assert_eq!(Scheduler::new(nodes(3), 1).order(&claims), [0, 1, 2, 3], "one after the other: as given");
        // Last, it still runs alone: it waits for the others to end.
        let mut s = Scheduler::new(nodes(3), 3);
        let mut pending: Vec<(usize, Claim)> = s.order(&claims).into_iter().map(|i| (i, claims[i].clone())).collect();
        assert_eq!(fill(&mut s, &mut pending), [(2, 0)], "cluster-wide alone");
        s.finish(2);
        assert_eq!(fill(&mut s, &mut pending), [(3, 0), (1, 1)]);
        s.finish(3);
        assert_eq!(fill(&mut s, &mut pending), [], "host-wide waits for the last one");
        s.finish(1);
        assert_eq!(fill(&mut s, &mut pending), [(0, 0)]);
    }

    #[test]
    fn the_longest_deadlines_are_offered_first() {
        let with = |scope, secs| Claim { budget: std::time::Duration::from_secs(secs), ..claim(scope) };
        let claims = [with(Scope::Node, 300), with(Scope::Namespace, 420), with(Scope::Host, 60), with(Scope::Node, 420), with(Scope::Node, 300)];
        assert_eq!(Scheduler::new(nodes(3), 6).order(&claims), [1, 3, 0, 4, 2], "7 min before 5 min, ties as given; host-wide last");
        assert_eq!(Scheduler::new(nodes(3), 1).order(&claims), [0, 1, 2, 3, 4], "one after the other: as given");
    }

    fn registry(i: usize, proxy: bool) -> (usize, Claim) {
        let mut host_ports = vec![HostPort { port: 5443, on_node_address: true }];
        if proxy {
            host_ports.push(HostPort { port: 5446, on_node_address: false });
        }
        (i, Claim { scope: Scope::Node, host_ports, host_disk: false, cluster_key: "default".into(), budget: std::time::Duration::ZERO })
    }

    #[test]
    fn scenarios_on_the_same_host_port_never_overlap() {
        // Nodes without registry addresses of their own: one registry at a time.
        let mut s = Scheduler::new(nodes(3), 3);
        let mut pending = vec![registry(0, false), registry(1, false), (2, claim(Scope::Node))];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (2, 1)]);
        s.finish(0);
        assert_eq!(fill(&mut s, &mut pending), [(1, 0)]);
        // Clusters of their own (kind's share the Docker network's gateway): the same.
        let mut s = Scheduler::new(Places::Clusters(2), 2);
        let mut pending = vec![registry(0, false), registry(1, false)];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0)]);
    }

    #[test]
    fn registries_on_each_nodes_own_address_run_side_by_side_but_not_on_one_address() {
        let at = |name: &str, addr: &str| NodePlace { name: name.into(), registry_address: Some(addr.into()) };
        let mut s = Scheduler::new(Places::Nodes(vec![at("a", "198.18.213.1"), at("b", "198.18.213.5"), at("c", "198.18.213.9")]), 3);
        let mut pending = vec![registry(0, true), registry(1, false), registry(2, true)];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 1)], "5443 on two addresses; the second proxy (5446 on 127.0.0.1) waits");
        s.finish(0);
        assert_eq!(fill(&mut s, &mut pending), [(2, 0)]);
        let mut s = Scheduler::new(Places::Nodes(vec![at("a", "127.0.0.1"), at("b", "127.0.0.1")]), 2);
        let mut pending = vec![registry(0, false), registry(1, false)];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0)], "one address for both nodes: one registry at a time");
    }

    #[test]
    fn jobs_caps_how_many_run_at_once() {
        let mut s = Scheduler::new(nodes(4), 2);
        let mut pending: Vec<(usize, Claim)> = (0..4).map(|i| (i, claim(Scope::Namespace))).collect();
        assert_eq!(fill(&mut s, &mut pending).len(), 2);
        let mut s = Scheduler::new(nodes(4), 1);
        let mut pending: Vec<(usize, Claim)> = (0..4).map(|i| (i, claim(Scope::Namespace))).collect();
        assert_eq!(fill(&mut s, &mut pending), [(0, 0)], "--jobs 1: one after the other");
    }

    #[test]
    fn a_free_cluster_slot_takes_a_scenario_its_cluster_serves_first() {
        let keyed = |i, key: &str| (i, Claim { scope: Scope::Node, host_ports: vec![], host_disk: false, cluster_key: key.into(), budget: std::time::Duration::ZERO });
        let mut s = Scheduler::new(Places::Clusters(2), 2);
        let mut pending = vec![keyed(0, "a"), keyed(1, "b"), keyed(2, "b"), keyed(3, "a")];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 1)]);
        s.finish(0);
        assert_eq!(fill(&mut s, &mut pending), [(3, 0)], "slot 0 has cluster a: the a scenario, though b's is first");
        s.finish(1);
        assert_eq!(fill(&mut s, &mut pending), [(2, 1)]);
        assert_eq!(s.running(), [3, 2]);
    }

    #[test]
    fn a_group_s_second_cluster_only_for_enough_of_it_waiting() {
        let keyed = |i, key: &str| (i, Claim { scope: Scope::Node, host_ports: vec![], host_disk: false, cluster_key: key.into(), budget: std::time::Duration::ZERO });
        // Three of group a: the first makes a's cluster, and the other two wait for it.
        let mut s = Scheduler::new(Places::Clusters(2), 2).keeping_clusters(true);
        let mut pending = vec![keyed(0, "a"), keyed(1, "a"), keyed(2, "a")];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0)], "two more of a wait for its cluster");
        // One of another group takes the free slot meanwhile.
        pending.push(keyed(3, "b"));
        assert_eq!(fill(&mut s, &mut pending), [(3, 1)]);
        s.finish(0);
        assert_eq!(fill(&mut s, &mut pending), [(1, 0)], "a's cluster, as it is");
        // Five of a: enough for a second cluster at once.
        let mut s = Scheduler::new(Places::Clusters(2), 2).keeping_clusters(true);
        let mut pending: Vec<_> = (0..5).map(|i| keyed(i, "a")).collect();
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 1)]);
        // CI's case: slot 0 keeps a plain cluster, slot 1 runs the first of a group of four, three of
        // it wait, and a host-wide plain one comes last (alone). Nothing starts: slot 0 keeps its
        // cluster for the plain one, and the group's three go on slot 1's.
        let mut s = Scheduler::new(Places::Clusters(2), 2).keeping_clusters(true);
        let mut pending = vec![keyed(0, "plain"), keyed(1, "special")];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 1)]);
        s.finish(0);
        let host = (5, Claim { scope: Scope::Host, host_ports: vec![], host_disk: false, cluster_key: "plain".into(), budget: std::time::Duration::ZERO });
        let mut pending = vec![keyed(2, "special"), keyed(3, "special"), keyed(4, "special"), host];
        assert_eq!(fill(&mut s, &mut pending), [], "no second special cluster for three");
        s.finish(1);
        assert_eq!(fill(&mut s, &mut pending), [(2, 1)], "the special cluster, as it is");
        // Clusters made for each scenario (--fresh-cluster): none waits for another's.
        let mut s = Scheduler::new(Places::Clusters(2), 2);
        let mut pending = vec![keyed(0, "a"), keyed(1, "a")];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 1)]);
    }

    #[test]
    fn the_threads_are_taken_in_the_order_of_their_ids_not_of_their_asking() {
        // The scheduler's order: the cluster-wide one first, then the node's failure, then a node-wide one.
        let slots = Slots::new(Scheduler::new(nodes(3), 6), [0, 1, 2]);
        let mut state = slots.state.lock().unwrap();
        // Their threads reach the lock the other way round (CI's test harness, 2026-11-29).
        state.ask(2, claim(Scope::Node));
        assert!(state.next().is_none(), "none starts before those in front of it have asked");
        state.ask(1, claim(Scope::NodeFailure));
        assert!(state.next().is_none(), "the failure waits for the cluster-wide one in front of it");
        state.ask(0, claim(Scope::Cluster));
        let (who, start) = state.next().expect("the cluster-wide one starts");
        assert_eq!(who, 0);
        let (_, c) = state.waiting.remove(start.pending);
        state.scheduler.start(0, start.place, c);
        assert!(state.next().is_none(), "it runs alone");
        state.scheduler.finish(0);
        let (who, start) = state.next().expect("then the failure");
        assert_eq!(who, 1);
        let (_, c) = state.waiting.remove(start.pending);
        state.scheduler.start(1, start.place, c);
        assert_eq!(state.next().map(|(who, _)| who), Some(2), "and the node-wide one beside it");
        // An id not expected is taken in its place among them.
        let mut later = Asking { scheduler: Scheduler::new(nodes(3), 6), waiting: vec![], expected: vec![0], asked: Default::default() };
        later.ask(5, claim(Scope::Node));
        assert!(later.next().is_none(), "5 waits for 0, expected");
        later.ask(0, claim(Scope::Node));
        assert_eq!(later.next().map(|(who, _)| who), Some(0));
    }

    #[test]
    fn threads_wait_their_turn_and_never_break_a_node_together() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let slots = Slots::new(Scheduler::new(nodes(2), 3), 0..7);
        let on_node = [AtomicUsize::new(0), AtomicUsize::new(0)];
        let alone_ok = AtomicUsize::new(1);
        let running = AtomicUsize::new(0);
        let scopes = [Scope::Node, Scope::Node, Scope::Namespace, Scope::Cluster, Scope::Node, Scope::Namespace, Scope::Node];
        std::thread::scope(|t| {
            for (id, scope) in scopes.into_iter().enumerate() {
                let (slots, on_node, alone_ok, running) = (&slots, &on_node, &alone_ok, &running);
                t.spawn(move || {
                    let lease = slots.acquire(id, claim(scope));
                    let place = if lease.node.as_deref() == Some("node-2") { 1 } else { 0 };
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    if scope == Scope::Cluster && now != 1 {
                        alone_ok.store(0, Ordering::SeqCst);
                    }
                    if scope == Scope::Node && on_node[place].fetch_add(1, Ordering::SeqCst) != 0 {
                        alone_ok.store(0, Ordering::SeqCst);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    if scope == Scope::Node {
                        on_node[place].fetch_sub(1, Ordering::SeqCst);
                    }
                    running.fetch_sub(1, Ordering::SeqCst);
                    drop(lease);
                });
            }
        });
        assert_eq!(alone_ok.load(Ordering::SeqCst), 1, "a node broken by two at once, or the cluster-wide one not alone");
        assert_eq!(slots.state.lock().unwrap().scheduler.running(), Vec::<usize>::new(), "every lease given back");
    }

    #[test]
    fn a_node_failure_holds_a_second_node_and_keeps_two_nodes_at_most_not_ready() {
        let mut s = Scheduler::new(nodes(3), 6);
        let mut pending = vec![(0, claim(Scope::NodeFailure)), (1, claim(Scope::Node)), (2, claim(Scope::Node)), (3, claim(Scope::Namespace))];
        // The failure takes node 0, and node 1 for its workload; one node-wide scenario gets the third,
        // and the namespace-only one waits for a node nobody breaks.
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 2)]);
        assert_eq!(s.spare_node(0), Some("node-2"));
        assert_eq!(pending.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [2, 3], "node 3 is node-wide's; nodes 1 and 2 the failure's");
        s.finish(1);
        assert_eq!(fill(&mut s, &mut pending), [(2, 2)]);
        s.finish(2);
        assert_eq!(fill(&mut s, &mut pending), [(3, 2)]);
        // On five nodes, still one node-wide scenario beside a failure: a third node not Ready (60 %)
        // would stop the controller's evictions.
        let mut s = Scheduler::new(nodes(5), 10);
        let mut pending = vec![(0, claim(Scope::NodeFailure)), (1, claim(Scope::Node)), (2, claim(Scope::Node)), (3, claim(Scope::NodeFailure)), (4, claim(Scope::Namespace))];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 2), (4, 3)]);
        s.finish(0);
        assert_eq!(fill(&mut s, &mut pending), [(2, 0)], "two node-wide ones, no failure");
        // And a failure waits while two node-wide scenarios run.
        assert_eq!(pending.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [3]);
        s.finish(1);
        assert_eq!(fill(&mut s, &mut pending), [(3, 1)]);
        assert!(s.spare_node(3).is_some_and(|n| n != "node-2" && n != "node-1"), "{:?}", s.spare_node(3));
    }

    #[test]
    fn two_that_fill_a_disk_on_this_machine_never_run_at_once() {
        let disk = |i| (i, Claim { host_disk: true, ..claim(Scope::Node) });
        let mut s = Scheduler::new(nodes(3), 6);
        let mut pending = vec![disk(0), disk(1), (2, claim(Scope::Node))];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (2, 1)], "the second waits; a node-wide one goes by");
        s.finish(2);
        assert_eq!(fill(&mut s, &mut pending), [], "still the first");
        s.finish(0);
        assert_eq!(fill(&mut s, &mut pending), [(1, 0)]);
        // On clusters of their own too.
        let mut s = Scheduler::new(Places::Clusters(2), 2);
        let mut pending = vec![disk(0), disk(1)];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0)]);
    }

    #[test]
    fn the_nodes_that_may_be_not_ready_follow_the_controller_s_zone_state() {
        // ComputeZoneState: full disruption with no node Ready; partial with more than two not Ready
        // and at least 55 % of the zone.
        let allowed: Vec<usize> = (1..=10).map(not_ready_allowed).collect();
        assert_eq!(allowed, [0, 1, 2, 2, 2, 3, 3, 4, 4, 5]);
        for nodes in 1..=16usize {
            let n = not_ready_allowed(nodes);
            let partial = |k: usize| k > 2 && (k as f32) / (nodes as f32) >= 0.55f32;
            let full = |k: usize| k == nodes;
            assert!(!partial(n) && !full(n), "{n} of {nodes}");
            assert!(partial(n + 1) || full(n + 1), "{} of {nodes} would do", n + 1);
        }
    }

    #[test]
    fn on_six_nodes_two_node_wide_scenarios_run_beside_a_node_failure() {
        let mut s = Scheduler::new(nodes(6), 12);
        let mut pending = vec![(0, claim(Scope::NodeFailure)), (1, claim(Scope::Node)), (2, claim(Scope::Node)), (3, claim(Scope::Node)), (4, claim(Scope::Namespace))];
        // The failure holds two nodes; two node-wide ones make at most three not Ready, 50 % of six; a
        // third would make four, 67 %.
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 2), (2, 3), (4, 4)]);
        assert_eq!(pending.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [3]);
        s.finish(1);
        assert_eq!(fill(&mut s, &mut pending), [(3, 2)]);
        // A failure waits while three node-wide ones run on six nodes.
        let mut s = Scheduler::new(nodes(6), 12);
        let mut pending = vec![(0, claim(Scope::Node)), (1, claim(Scope::Node)), (2, claim(Scope::Node)), (3, claim(Scope::NodeFailure))];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 1), (2, 2)]);
        s.finish(0);
        assert_eq!(fill(&mut s, &mut pending), [(3, 0)], "two node-wide and the failure: three");
    }

    #[test]
    fn a_node_failure_on_one_node_or_its_own_cluster_holds_one_place() {
        let mut s = Scheduler::new(nodes(1), 2);
        let mut pending = vec![(0, claim(Scope::NodeFailure))];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0)], "its run refuses the cluster, not the scheduler");
        assert_eq!(s.spare_node(0), None);
        let mut s = Scheduler::new(Places::Clusters(2), 2);
        let mut pending = vec![(0, claim(Scope::NodeFailure)), (1, claim(Scope::Node)), (2, claim(Scope::Node))];
        assert_eq!(fill(&mut s, &mut pending), [(0, 0), (1, 1)]);
        assert_eq!(s.spare_node(0), None);
    }

    #[test]
    fn nodes_are_named_by_place() {
        let s = Scheduler::new(nodes(2), 2);
        assert_eq!(s.node(1), Some("node-2"));
        assert_eq!(Scheduler::new(Places::Clusters(3), 2).node(0), None);
    }
}
