//! Quality of service: history, queue depth, overflow policy, limits and memory budget.

use std::time::Duration;

/// What happens when a subscriber's queue is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    /// The oldest queued sample is replaced; the subscriber counts the loss.
    DropOldest,
    /// The publisher waits up to `timeout` for room, then `publish` returns an error.
    BackPressure {
        /// Longest time one send may wait for a full subscriber queue.
        timeout: Duration,
    },
}

/// Quality of service of a topic.
///
/// The first participant that creates a topic fixes its topic-wide settings (`history`,
/// the maximum queue depth, `overflow`, `max_publishers`, `max_subscribers`); later
/// participants must be compatible with them and get a clear error otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Qos {
    /// Samples a publisher keeps for subscribers that join later.
    pub history: usize,
    /// Samples a subscriber's queue holds before overflow applies.
    pub depth: usize,
    /// Overflow policy when a queue is full.
    pub overflow: Overflow,
    /// Most publishers on the topic.
    pub max_publishers: usize,
    /// Most subscribers on the topic.
    pub max_subscribers: usize,
    /// Samples a subscriber may hold (not yet dropped) at once.
    pub max_borrowed: usize,
    /// Samples a publisher may have loaned at once.
    pub max_loans: usize,
    /// Payload bytes a publisher reserves at first for slice messages; it grows on demand.
    pub initial_payload: usize,
    /// Largest payload in bytes; a larger loan fails with an error naming both sizes.
    pub max_payload: usize,
    /// Shared memory budget in bytes for the sample pool of a publisher of fixed-size
    /// messages under back-pressure: its pool holds the worst case the QoS needs, capped
    /// at this budget but never fewer than 4 samples, and `loan` reports
    /// [`crate::LoanError::PoolExhausted`] when readers hold it all. Drop-oldest topics
    /// and slice messages get pools their readers cannot exhaust (a slow reader never
    /// fails a sensor publisher); pages are touched only as samples are used, so memory
    /// follows the samples in use, not the pool's size.
    pub shm_budget: usize,
}

const MIB: usize = 1 << 20;

impl Default for Qos {
    /// Sensor-style defaults: depth 4, drop oldest, no history.
    fn default() -> Self {
        Qos {
            history: 0,
            depth: 4,
            overflow: Overflow::DropOldest,
            max_publishers: 8,
            max_subscribers: 8,
            max_borrowed: 2,
            max_loans: 2,
            initial_payload: 64 * 1024,
            max_payload: 256 * MIB,
            shm_budget: 8 * MIB,
        }
    }
}

impl Qos {
    /// Queue depth every topic supports, whatever depth its creator asked for: a
    /// subscriber that joins later may always ask for this many (a recorder does).
    pub const GUARANTEED_DEPTH: usize = 256;

    /// Streams of sensor data: newest wins, a slow reader never slows the publisher.
    pub fn sensor() -> Self {
        Qos::default()
    }

    /// Every sample is delivered: the publisher waits (up to 1 s) for a full queue.
    pub fn reliable() -> Self {
        Qos {
            depth: 64,
            overflow: Overflow::BackPressure {
                timeout: Duration::from_secs(1),
            },
            ..Qos::default()
        }
    }

    /// The last sample is kept for late joiners (maps, parameters, static transforms).
    pub fn latched() -> Self {
        Qos {
            history: 1,
            depth: 1,
            ..Qos::default()
        }
    }

    /// Sets the history for late joiners.
    pub fn history(mut self, n: usize) -> Self {
        self.history = n;
        self
    }
    /// Sets the subscriber queue depth.
    pub fn depth(mut self, n: usize) -> Self {
        self.depth = n;
        self
    }
    /// Sets the overflow policy.
    pub fn overflow(mut self, o: Overflow) -> Self {
        self.overflow = o;
        self
    }
    /// Sets the most publishers and subscribers on the topic.
    pub fn max_endpoints(mut self, publishers: usize, subscribers: usize) -> Self {
        self.max_publishers = publishers;
        self.max_subscribers = subscribers;
        self
    }
    /// Sets the initial and largest payload sizes in bytes.
    pub fn payload(mut self, initial: usize, max: usize) -> Self {
        self.initial_payload = initial;
        self.max_payload = max;
        self
    }
    /// Sets the shared-memory budget of one publisher's pool in bytes.
    pub fn shm_budget(mut self, bytes: usize) -> Self {
        self.shm_budget = bytes;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.depth == 0 {
            return Err("depth must be at least 1".into());
        }
        if self.max_publishers == 0 || self.max_subscribers == 0 {
            return Err("max_publishers and max_subscribers must be at least 1".into());
        }
        if self.max_borrowed == 0 || self.max_loans == 0 {
            return Err("max_borrowed and max_loans must be at least 1".into());
        }
        if matches!(self.overflow, Overflow::BackPressure { .. }) && self.history > self.depth {
            return Err(format!(
                "history {} exceeds depth {} under back-pressure",
                self.history, self.depth
            ));
        }
        if self.initial_payload > self.max_payload {
            return Err(format!(
                "initial_payload {} exceeds max_payload {}",
                self.initial_payload, self.max_payload
            ));
        }
        Ok(())
    }

    /// Number of samples one publisher's pool holds for a sample of `sample_bytes`.
    pub(crate) fn pool_samples(&self, worst_case: usize, sample_bytes: usize) -> usize {
        let by_budget = (self.shm_budget / sample_bytes.max(1)).max(4);
        worst_case.min(by_budget).max(1)
    }
}

/// Limits of a service. The creator's settings fix the service's capacity (clients, calls in
/// flight); payload limits and memory are per endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceQos {
    /// Clients the service admits at once.
    pub max_clients: usize,
    /// Calls one client may have in flight at once.
    pub max_in_flight: usize,
    /// Payload bytes each endpoint's shared memory is first sized for (grows by powers of
    /// two up to the maxima).
    pub initial_payload: usize,
    /// Largest request in bytes; larger requests fail before anything is sent.
    pub max_request: usize,
    /// Largest response in bytes.
    pub max_response: usize,
    /// Shared memory one endpoint may pre-allocate for its payload pool, in bytes.
    pub shm_budget: usize,
}

impl Default for ServiceQos {
    fn default() -> Self {
        ServiceQos {
            max_clients: 16,
            max_in_flight: 8,
            initial_payload: 64 * 1024,
            max_request: 64 * MIB,
            max_response: 64 * MIB,
            shm_budget: 16 * MIB,
        }
    }
}

impl ServiceQos {
    /// Sets the largest request and response in bytes (and lowers the initial size to fit).
    pub fn max_payload(mut self, request: usize, response: usize) -> Self {
        self.max_request = request;
        self.max_response = response;
        self.initial_payload = self.initial_payload.min(request.max(response));
        self
    }

    /// Sets the calls one client may have in flight.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.max_clients == 0 || self.max_in_flight == 0 {
            return Err("max_clients and max_in_flight must be at least 1".into());
        }
        if self.initial_payload > self.max_request.max(self.max_response) {
            return Err(format!(
                "initial_payload {} exceeds both maxima",
                self.initial_payload
            ));
        }
        Ok(())
    }

    /// Payload chunks an endpoint pre-allocates: what the service's capacity needs, capped by
    /// the memory budget (at least 4).
    pub(crate) fn pool(&self, worst_case: usize) -> usize {
        let chunk = self.initial_payload.max(1);
        worst_case.min((self.shm_budget / chunk).max(4)).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        for q in [
            Qos::default(),
            Qos::sensor(),
            Qos::reliable(),
            Qos::latched(),
        ] {
            q.validate().unwrap();
        }
        assert!(Qos::default().depth(0).validate().is_err());
    }

    #[test]
    fn pool_is_capped_by_budget_for_large_samples() {
        let q = Qos::default();
        // 1 MB samples: worst case 50, budget 8 MiB -> 8 samples
        assert_eq!(q.pool_samples(50, 1 << 20), 8);
        // small samples: the worst case fits
        assert_eq!(q.pool_samples(50, 304), 50);
        // huge samples: never fewer than 4
        assert_eq!(q.pool_samples(50, 10 << 20), 4);
    }

    #[test]
    fn qos_validation_and_pool() {
        ServiceQos::default().validate().unwrap();
        assert!(ServiceQos::default().max_in_flight(0).validate().is_err());
        let q = ServiceQos::default();
        assert_eq!(q.pool(1000), 256, "16 MiB of 64 KiB chunks");
        assert_eq!(q.pool(10), 10);
    }
}
