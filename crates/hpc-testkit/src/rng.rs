//! A small deterministic generator of test data: a 64-bit linear
//! congruential generator (Knuth's MMIX constants), its top 53 bits as a
//! uniform value in (0, 1), and normal values by Box-Muller. Enough for
//! synthetic traces and property checks; not for anything else.
//! ([`crate::sacct_gen`] keeps its own xorshift generator: the sacct text
//! the benchmarks and tests were measured on stays the same.)

/// The generator's state.
#[derive(Debug, Clone)]
pub struct Lcg(u64);

impl Lcg {
    /// A generator that starts from `state`.
    pub fn new(state: u64) -> Lcg {
        Lcg(state)
    }

    /// A uniform value in (0, 1), never 0 nor 1.
    pub fn uniform(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A standard normal value.
    pub fn normal(&mut self) -> f64 {
        let (a, b) = (self.uniform(), self.uniform());
        (-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()
    }
}
