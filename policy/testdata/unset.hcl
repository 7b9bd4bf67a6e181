# A policy that bounds nothing yet.
