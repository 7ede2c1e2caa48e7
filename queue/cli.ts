#!/usr/bin/env node
// The `leasehold` command: one entry point that starts each service, a worker or the demo.
import { Command } from 'commander';
import { queueCommand } from './main.js';
import { gatewayCommand } from '../gateway/main.js';
import { receiverCommand } from '../receiver/main.js';

const program = new Command('leasehold')
  .description('Fenced leases for job workers: a queue, a fencing gateway and an idempotent receiver.')
  .showHelpAfterError()
  .enablePositionalOptions();

// Each service registers its own subcommand below (see each folder's main.ts).
program.addCommand(queueCommand());
program.addCommand(gatewayCommand());
program.addCommand(receiverCommand());

await program.parseAsync(process.argv);
